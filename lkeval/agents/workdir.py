"""Each agent's own working directory, so files an agent writes per room (the console's room
is always ``console``) do not collide between scenarios running at once."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from lkeval.host import tree


def prepare_agent_dir(path: Path, project: Path) -> None:
    """The agent's own working directory: a link to each entry of the project directory (so
    relative reads work), plus its temp dir; files it creates stay its own.

    Each link points at the entry's real path. The project directory is resolved once and only
    entries that are links themselves are resolved on their own: resolving every entry walked
    the whole path each time, half of this function's CPU, paid by every scenario.
    """
    path.mkdir(parents=True, exist_ok=True)
    (path / tree.AGENT_TMP).mkdir(exist_ok=True)
    with contextlib.suppress(OSError):
        real_project = project.resolve()
        for entry in os.scandir(project):
            if entry.name == tree.AGENT_TMP:
                continue
            target = real_project / entry.name
            if entry.is_symlink():
                target = target.resolve()
            with contextlib.suppress(OSError):  # already there (a second attempt's directory)
                os.symlink(target, path / entry.name)
