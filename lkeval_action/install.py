"""Installing the agent's own dependencies into the image's Python, outside the checkout.

The agent runs on the container's Python, so its dependencies go there (site-packages, not the
workspace). Builds happen in a copy of the checkout under ``/tmp``: setuptools writes
``build/`` and ``*.egg-info/`` next to the sources it builds, and as root in the container they
would be left in the runner user's checkout (where checkout's next clean step fails on them).
Installs are never editable, so nothing points back into the copy once it is gone; uv's and
pip's caches live in the same scratch space (not in ``$HOME``, which the runner keeps). A custom
``install`` command is the user's own line and runs where they said, in working-directory.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from lkeval.text.untrusted import shown_command
from lkeval_action.commands import workflow_command
from lkeval_action.inputs import INSTALL_AUTO, INSTALL_NONE
from lkeval_action.processes import Interrupted, SignalRelay

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the image runs 3.11; lkeval_action is never imported on 3.10
    tomllib = None

#: The uv export of a uv.lock, written inside the copy so relative paths in it (``.``, a
#: workspace member) mean the same to uv whether it reads them from the file or the cwd.
EXPORTED = "lkeval-uv-export.txt"
#: What is never copied: version control, environments, caches, and lk-eval's own results.
NOT_COPIED = (
    ".git",
    ".venv",
    ".venv-*",
    "venv",
    "node_modules",
    "__pycache__",
    "*.py[co]",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".tox",
    ".nox",
    "lkeval-results",
)


class InstallError(Exception):
    """Installing the agent's dependencies failed; the message says which command."""


@dataclass(frozen=True)
class InstallPlan:
    """The commands that install an agent's dependencies, and what to say about them.

    ``in_copy``: run them in a copy of the checkout (lk-eval's own detection), not in the
    working directory itself (a user's command).
    """

    what: str
    commands: tuple[tuple[str, ...], ...] = ()
    notice: str | None = None
    in_copy: bool = True


def install_plan(spec: str, directory: Path, *, python: str, uv: str | None) -> InstallPlan:
    """Which commands install the agent's dependencies for ``install: spec`` in ``directory``.

    ``auto`` looks for, in order: ``uv.lock`` (exported and installed by uv, so the versions
    are the locked ones; needs ``uv``, which the image has), ``requirements.txt``
    (``pip install -r``) and ``pyproject.toml`` (see :func:`pyproject_plan`). Everything goes
    into ``python``, the interpreter lkeval runs the agent on. Pure: it looks at files only.
    """
    if spec == INSTALL_NONE:
        return InstallPlan("install: none")
    if spec != INSTALL_AUTO:
        return InstallPlan("install command", (("sh", "-c", spec),), in_copy=False)
    pip = (python, "-m", "pip", "install", "--no-warn-script-location")
    notice = None
    if (directory / "uv.lock").is_file():
        if uv:
            return InstallPlan(
                "uv.lock",
                (
                    (
                        uv,
                        "export",
                        "--frozen",
                        "--no-hashes",
                        "--no-dev",
                        "--no-editable",
                        "--quiet",
                        "--output-file",
                        EXPORTED,
                    ),
                    (uv, "pip", "install", "--python", python, "--requirement", EXPORTED),
                ),
            )
        notice = "uv.lock found but uv is not installed: its locked versions are not used"
    if (directory / "requirements.txt").is_file():
        return InstallPlan("requirements.txt", ((*pip, "-r", "requirements.txt"),), notice)
    if (directory / "pyproject.toml").is_file():
        return pyproject_plan(
            directory / "pyproject.toml", pip, python=python, uv=uv, notice=notice
        )
    return InstallPlan(
        "install: auto",
        notice=f"no uv.lock, requirements.txt or pyproject.toml in {directory}: installing "
        "nothing (set install: none to skip the search, or give an install command)",
    )


def pyproject_plan(
    path: Path, pip: tuple[str, ...], *, python: str, uv: str | None, notice: str | None
) -> InstallPlan:
    """A ``pyproject.toml``: the package itself when it is one, else only its dependencies.

    A project is a package by uv's own rule: ``[tool.uv] package`` when set, else whether it
    declares a ``[build-system]``. A package is installed with ``pip install .`` (its
    dependencies come with it). LiveKit's example agents are not packages: a ``[project]``
    with ``dependencies`` and several top-level modules, which ``pip install .`` refuses to
    build; for them only the dependencies are installed (``uv pip install -r pyproject.toml``)
    and the agent runs from the checkout, as it does in development (``uv run``).
    """
    what = "pyproject.toml"
    project = read_pyproject(path)
    table = project.get("project")
    tool = project.get("tool")
    uv_table = tool.get("uv") if isinstance(tool, dict) else None
    package = uv_table.get("package") if isinstance(uv_table, dict) else None
    if not isinstance(package, bool):
        package = "build-system" in project
    if package or not isinstance(table, dict):
        return InstallPlan(what, ((*pip, "."),), notice)
    if not uv:
        why = "pyproject.toml is not a package and uv is not installed: trying pip install ."
        notice = f"{notice}; {why}" if notice else why
        return InstallPlan(what, ((*pip, "."),), notice)
    command = (uv, "pip", "install", "--python", python, "--requirement", path.name)
    return InstallPlan(f"{what} (its dependencies)", (command,), notice)


def read_pyproject(path: Path) -> dict[str, object]:
    """``pyproject.toml`` as a table; :class:`InstallError` naming the file and line if it is
    not TOML."""
    if tomllib is None:  # pragma: no cover - see the import
        return {"build-system": {}}
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except tomllib.TOMLDecodeError as exc:
        raise InstallError(f"{path.name}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise InstallError(f"{path.name}: cannot read it: {exc.strerror}") from None


def copy_checkout(directory: Path, workspace: Path | None, scratch: Path) -> Path:
    """Copy the checkout into ``scratch`` and return ``directory``'s place in the copy.

    The whole workspace is copied when ``directory`` is inside it, so a requirement on a
    sibling folder (``../libs/common``, a uv workspace member) still resolves.
    """
    directory = directory.resolve()
    root = directory
    if workspace is not None and directory.is_relative_to(workspace.resolve()):
        root = workspace.resolve()
    copy = scratch / "checkout"
    shutil.copytree(root, copy, symlinks=True, ignore=shutil.ignore_patterns(*NOT_COPIED))
    return copy / directory.relative_to(root)


def install_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The install's environment: no ``.pyc`` files written anywhere it imports from."""
    return {**env, "PYTHONDONTWRITEBYTECODE": "1"}


def cache_environment(scratch: Path) -> dict[str, str]:
    """uv's and pip's caches in the container's own scratch space, gone when it is.

    Left to themselves they write under ``$HOME/.cache``; in a Docker action ``$HOME`` is
    ``/github/home``, a runner folder that outlives the step, and the container is root: a uv
    install left ~200 MB of root-owned cache there. A cache is of no use to the next run
    anyway (each job starts from a fresh runner)."""
    return {
        "UV_CACHE_DIR": str(scratch / "cache" / "uv"),
        "PIP_CACHE_DIR": str(scratch / "cache" / "pip"),
    }


def run_install(
    plan: InstallPlan,
    env: Mapping[str, str],
    log: Callable[[str], None],
    relay: SignalRelay | None = None,
    cwd: Path | None = None,
) -> None:
    """Run the install commands in ``cwd``; :class:`InstallError` on failure,
    :class:`Interrupted` when a signal stopped them."""
    if plan.notice:
        log(workflow_command("notice", plan.notice))
    if not plan.commands:
        return
    relay = relay or SignalRelay()
    log(workflow_command("group", f"lk-eval: install the agent's dependencies ({plan.what})"))
    try:
        for command in plan.commands:
            log("$ " + shown_command(command))  # the install input, on one line
            try:
                # its own process group, so a signal stops `sh -c` and all it started
                code = relay.run(
                    command, install_environment(env), group=True, stdin=subprocess.DEVNULL, cwd=cwd
                )
            except OSError as exc:
                raise InstallError(
                    f"{plan.what}: cannot run {command[0]}: {exc.strerror}"
                ) from None
            if relay.received:
                raise Interrupted(relay.received[0])
            if code != 0:
                raise InstallError(
                    f"installing the agent's dependencies ({plan.what}) failed: "
                    f"`{shlex.join(command)}` exited with code {code}"
                )
    finally:
        log("::endgroup::")
