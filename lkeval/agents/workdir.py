"""Each agent's own working directory, so files an agent writes per room (the console's room
is always ``console``) do not collide between scenarios running at once."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from lkeval.agents import agent_host


def prepare_agent_dir(path: Path, project: Path) -> None:
    """The agent's own working directory: a link to each entry of the project directory (so
    relative reads work), plus its temp dir; files it creates stay its own."""
    path.mkdir(parents=True, exist_ok=True)
    (path / agent_host.AGENT_TMP).mkdir(exist_ok=True)
    with contextlib.suppress(OSError):
        for entry in os.scandir(project):
            link = path / entry.name
            if entry.name != agent_host.AGENT_TMP and not os.path.lexists(link):
                with contextlib.suppress(OSError):
                    link.symlink_to(Path(entry.path).resolve())
