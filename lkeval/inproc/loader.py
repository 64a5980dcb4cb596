"""The user's agent module, imported into lk-eval's own interpreter once per process.

The console's host finds the ``AgentServer`` with livekit's own discovery
(``livekit.agents.__main__._discover_server``: an ``app``, ``server`` or ``agent`` global,
else the one ``AgentServer`` of the module); so does this, so ``lkeval dev`` plays the same
server ``lkeval run`` does. A module is imported once per interpreter (Python caches it):
``lkeval dev`` is one process per edit, and a pytest session plays all its scenarios against
the one import.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from lkeval.errors import ConfigError

#: Said with every import error: the agent's code runs in the interpreter that runs lk-eval.
VENV_HINT = (
    "the agent runs in-process, in the interpreter that runs lk-eval ({python}): install "
    "lk-eval in the agent's own environment as a dev dependency (e.g. `uv add --dev lk-eval`, "
    "then `uv run lkeval dev ...`), or use `lkeval run --python PATH`, which runs the agent "
    "in its own interpreter"
)


class AgentImportError(ConfigError):
    """livekit-agents, or a module the agent imports, is missing here (exit 2)."""


_servers: dict[Path, Any] = {}


def load_server(agent: Path) -> Any:
    """The ``AgentServer`` the agent file defines, imported once per process.

    Raises :class:`AgentImportError` naming the missing module and how to fix it, and
    :class:`~lkeval.errors.ConfigError` for a file that is not an agent.
    """
    path = agent.resolve()
    server = _servers.get(path)
    if server is not None:
        return server
    if not path.is_file():
        raise ConfigError(f"--agent {agent}: no such file")
    try:
        from livekit.agents.__main__ import _discover_server
    except ModuleNotFoundError as exc:
        raise AgentImportError(f"livekit-agents is not installed here ({exc}); {hint()}") from None
    clash = _imported_elsewhere(path)
    if clash:
        raise ConfigError(
            f"{agent}: a module named {path.stem!r} is already imported in this interpreter "
            f"from {clash}; one interpreter holds one module per name: play this agent in a "
            "process of its own"
        )
    try:  # puts the agent's directory first on sys.path, as the console's host does
        server = _discover_server(str(path))
    except ModuleNotFoundError as exc:
        raise AgentImportError(f"{agent}: cannot import {exc.name!r} ({exc}); {hint()}") from None
    except (ImportError, SyntaxError) as exc:
        raise ConfigError(f"{agent}: the agent module does not import: {exc}") from None
    except Exception as exc:  # livekit's discovery: no AgentServer, several, a bad name
        raise ConfigError(f"{agent}: {type(exc).__name__}: {exc}") from None
    _servers[path] = server
    return server


def _imported_elsewhere(path: Path) -> str:
    """The file of a module already imported under the agent's module name, when that is
    another file (Python would hand back that module instead of importing the agent)."""
    module = sys.modules.get(path.stem)
    where = getattr(module, "__file__", None)
    if not where or Path(where).resolve() == path:
        return ""
    return str(where)


def hint() -> str:
    """How to run an agent whose environment is not lk-eval's."""
    return VENV_HINT.format(python=sys.executable)


def forget(agent: Path) -> int:
    """Drop the agent's modules (every module from a file under its folder) and its server,
    so the next :func:`load_server` imports the edited source (``lkeval dev --watch``).
    livekit and the other installed packages stay imported: that is the time saved. Returns
    how many modules were dropped."""
    folder = agent.resolve().parent
    _servers.pop(agent.resolve(), None)
    dropped = [name for name, module in list(sys.modules.items()) if _under(module, folder)]
    for name in dropped:
        del sys.modules[name]
    return len(dropped)


def _under(module: object, folder: Path) -> bool:
    where = getattr(module, "__file__", None)
    if not where:
        return False
    path = Path(where).resolve()
    return path.is_relative_to(folder) and not _installed(path.relative_to(folder))


def _installed(relative: Path) -> bool:
    """A path inside the project that holds installed packages (its own virtual env)."""
    return any(part in ("site-packages", "dist-packages") for part in relative.parts)
