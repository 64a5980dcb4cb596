"""``lkeval dev --watch``: wait for the next edit of the agent or its scenarios.

Polls modification times (no inotify dependency, the same on Linux and macOS): every Python
file under the agent's folder, its own virtual environment, caches and hidden folders aside,
and the scenario files. A poll reads a few hundred ``stat`` results; an edit is seen within
:data:`POLL_SECONDS`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

POLL_SECONDS = 0.25
#: Folders never watched: installed packages, caches, version control, build output.
SKIPPED = {"__pycache__", "node_modules", "site-packages", "build", "dist"}
#: A bound on the files watched, so a huge project folder cannot make a poll slow.
MAX_FILES = 5000

Snapshot = dict[str, float]


def _files(agent: Path, scenarios: Sequence[Path]) -> Iterator[str]:
    yield from (str(p) for p in scenarios)
    count = 0
    for root, dirs, files in os.walk(agent.resolve().parent):
        dirs[:] = [d for d in dirs if d not in SKIPPED and not d.startswith(".")]
        dirs[:] = [d for d in dirs if not (Path(root) / d / "pyvenv.cfg").exists()]
        for name in files:
            if name.endswith(".py"):
                count += 1
                if count > MAX_FILES:
                    return
                yield os.path.join(root, name)


def snapshot(agent: Path, scenarios: Sequence[Path]) -> Snapshot:
    """The modification time of every watched file now."""
    seen: Snapshot = {}
    for path in _files(agent, scenarios):
        try:
            seen[path] = os.stat(path).st_mtime_ns
        except OSError:
            seen[path] = -1.0
    return seen


def wait_for_change(agent: Path, scenarios: Sequence[Path], since: Snapshot) -> Snapshot:
    """Block until a watched file changes, appears or goes, then until the files stay the
    same for one more poll (an editor saves in steps); the new snapshot."""
    now = since
    while now == since:
        time.sleep(POLL_SECONDS)
        now = snapshot(agent, scenarios)
    while True:
        time.sleep(POLL_SECONDS)
        settled = snapshot(agent, scenarios)
        if settled == now:
            return settled
        now = settled
