"""Hand the workspace back to the runner's user after the container wrote into it.

A Docker action runs as root while the checkout belongs to the runner's user (uid 1001 on
hosted runners); later steps (``actions/upload-artifact``, checkout's clean step on a
self-hosted runner) run as that user. So after the run everything this process created in the
workspace is given to the workspace's owner, and lk-eval's own reports are made readable
(0644, their folders 0755). Other files keep their modes: a file the agent made private stays
private, it only changes hands.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

FILE_MODE = 0o644
DIR_MODE = 0o755
#: Never walked: the checkout's history is not ours to touch.
NOT_WALKED = (".git",)


@dataclass(frozen=True)
class HandBack:
    """What :func:`hand_back` changed."""

    chowned: int = 0
    made_readable: int = 0


def readable(path: Path) -> bool:
    """Make one of lk-eval's own files 0644 (0755 if executable), a folder 0755."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(info.st_mode):
        mode = DIR_MODE
    elif stat.S_ISREG(info.st_mode):
        mode = FILE_MODE | (0o111 if info.st_mode & stat.S_IXUSR else 0)
    else:
        return False
    if stat.S_IMODE(info.st_mode) == mode:
        return False
    path.chmod(mode)
    return True


def report_paths(outputs: Iterable[Path], working_directory: Path) -> set[Path]:
    """lk-eval's reports and the folders between them and ``working_directory``."""
    found: set[Path] = set()
    top = working_directory.resolve()
    for output in outputs:
        path = (working_directory / output).resolve()
        found.add(path)
        for parent in path.parents:
            if parent == top or not parent.is_relative_to(top):
                break
            found.add(parent)
    return found


def created_here(root: Path, uid: int) -> Iterable[Path]:
    """Every path under ``root`` owned by ``uid`` (not following links, not into ``.git``)."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in NOT_WALKED]
        for name in (*dirs, *files):
            path = Path(folder, name)
            try:
                if path.lstat().st_uid == uid:
                    yield path
            except FileNotFoundError:
                continue


def hand_back(workspace: Path, reports: Iterable[Path]) -> HandBack:
    """Make ``reports`` readable, then give what this process created to the workspace's owner.

    Nothing is chowned when the workspace already belongs to this process's user (a laptop's
    ``docker run``, a runner that runs as root) or when this process is not root.
    """
    made_readable = sum(readable(path) for path in reports)
    owner = workspace.stat()
    me = os.geteuid()
    if me != 0 or owner.st_uid == me:
        return HandBack(made_readable=made_readable)
    chowned = 0
    for path in created_here(workspace, me):
        os.lchown(path, owner.st_uid, owner.st_gid)
        chowned += 1
    return HandBack(chowned=chowned, made_readable=made_readable)
