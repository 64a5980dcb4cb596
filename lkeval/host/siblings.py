"""The one loader of the host's files: how a file of ``lkeval/host/`` finds its siblings.

Everything in this folder runs in the agent's interpreter, which may not have lk-eval
installed: lk-eval starts ``agent_host.py`` or ``fork_server.py`` there by file path. So a
host file never imports a sibling through ``sys.path`` (a user module named ``tape`` or
``pins`` must stay the user's): each sibling is executed from its file under a private name
(``_lkeval_<name>``) and kept in ``sys.modules``, so it is loaded once per process (the fork
server loads them before it forks; a child finds them loaded). Imported as ``lkeval.host``
(lk-eval's own process, tests, type checks), the same names are plain package imports.

The two entry scripts load this file by path themselves (a few lines each: it cannot load
itself); every other host file asks it for its siblings. Standard library only.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import Any

HOST_DIR = os.path.dirname(os.path.abspath(__file__))
#: Prefix of a sibling's private module name when loaded by path.
PRIVATE = "_lkeval_"
#: "lkeval.host" when imported as a package module; "" when loaded by path.
PACKAGE = __package__ or ""


def sibling(name: str) -> Any:
    """The host module ``name`` (``tape``, ``pins`` ...), loaded once per process. By path,
    ``pins`` comes first: the speed patches read their pins from it."""
    if PACKAGE:
        return importlib.import_module(f"{PACKAGE}.{name}")
    loaded = sys.modules.get(PRIVATE + name)
    if loaded is not None:
        return loaded
    if name != "pins":
        sibling("pins")
    return load_by_path(PRIVATE + name, os.path.join(HOST_DIR, f"{name}.py"))


def load_by_path(module_name: str, path: str) -> Any:
    """Execute the file at ``path`` as the module ``module_name`` (registered in
    ``sys.modules`` first, as an import would, so that it can find itself)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
