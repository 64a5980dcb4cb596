"""The checkout lk-eval runs in: its root, and the commit and branch checked out, without git.

The Action's image has no ``git`` binary (it cost ~100 MB for one sha), and the runner already
says most of it: ``GITHUB_WORKSPACE`` is the checkout's root, the event payload names the PR's
head commit. Outside Actions (a laptop, another CI) the root is the nearest folder upwards
holding ``.git`` (a folder, or a file pointing to one for worktrees and submodules), and the
commit is read from ``.git/HEAD`` and the refs it names, loose or packed.

Why the root matters: reports name scenario files relative to it, the form GitHub and the JUnit
annotators (mikepenz, EnricoMi) match against the PR's files. A path relative to the working
directory (``working-directory: agent``) names a file that does not exist at the root.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
#: How far up a checkout root is looked for (a deep working directory is a few levels).
MAX_LEVELS = 64


def repo_root(environ: Mapping[str, str] | None = None, start: Path | None = None) -> Path | None:
    """``GITHUB_WORKSPACE`` when set, else the nearest folder from ``start`` up with ``.git``."""
    env = os.environ if environ is None else environ
    workspace = env.get("GITHUB_WORKSPACE")
    if workspace:
        return Path(workspace).resolve()
    here = (start or Path.cwd()).resolve()
    for folder in [here, *here.parents][:MAX_LEVELS]:
        if (folder / ".git").exists():
            return folder
    return None


def git_dir(root: Path) -> Path | None:
    """The repository's git folder: ``root/.git``, or where a ``.git`` file points."""
    dot_git = root / ".git"
    if dot_git.is_dir():
        return dot_git
    try:
        text = dot_git.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    target = Path(text.removeprefix("gitdir:").strip())
    return target if target.is_absolute() else (root / target).resolve()


def head(root: Path | None) -> tuple[str | None, str | None]:
    """(commit sha, branch name) checked out at ``root``; None for what cannot be read.

    A detached HEAD (how actions/checkout leaves a PR) has a sha and no branch.
    """
    where = git_dir(root) if root is not None else None
    if where is None:
        return None, None
    text = _read(where / "HEAD")
    if text is None:
        return None, None
    if _SHA.match(text):
        return text, None
    if not text.startswith("ref:"):
        return None, None
    ref = text.removeprefix("ref:").strip()
    branch = ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else None
    return _resolve_ref(where, ref), branch


def _resolve_ref(where: Path, ref: str) -> str | None:
    """A ref's sha: the loose file, else ``packed-refs``, in the worktree's common folder too."""
    folders = [where]
    common = _read(where / "commondir")
    if common:
        folders.append((where / common).resolve())
    for folder in folders:
        loose = _read(folder / ref)
        if loose and _SHA.match(loose):
            return loose
        packed = _read(folder / "packed-refs") or ""
        for line in packed.splitlines():
            sha, _, name = line.partition(" ")
            if name.strip() == ref and _SHA.match(sha):
                return sha
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def recorded_commit(
    environ: Mapping[str, str] | None = None, start: Path | None = None
) -> tuple[str | None, str | None]:
    """(sha, branch) a results file records, without running git.

    In Actions: the PR's head commit from the event payload (``GITHUB_SHA`` is then a merge
    commit nobody pushed), else ``GITHUB_SHA``; the branch from ``GITHUB_HEAD_REF`` or
    ``GITHUB_REF_NAME``. Elsewhere, or for what Actions does not say: the checkout's ``.git``.
    """
    from lkeval.publish.github.context import read_context

    env = os.environ if environ is None else environ
    ctx = read_context(env)
    sha = ctx.head_sha
    branch = env.get("GITHUB_HEAD_REF") or None
    if branch is None and env.get("GITHUB_REF_TYPE") == "branch":
        branch = env.get("GITHUB_REF_NAME") or None
    if sha is None or branch is None:
        local_sha, local_branch = head(repo_root(env, start))
        sha, branch = sha or local_sha, branch or local_branch
    return sha, branch
