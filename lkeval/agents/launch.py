"""The run's launcher: warm starts from a fork server, else cold starts, and the line saying why.

Kept apart from :mod:`lkeval.agents.fork_client` and :mod:`lkeval.agents.cold` because it is
the one place that chooses between the two behind the :class:`~lkeval.agents.interface.Launcher`
seam.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from lkeval.agents.cold import ColdLauncher
from lkeval.agents.fork_client import ForkServer, ForkServerError
from lkeval.agents.interface import Launcher


def open_launcher(
    python: str,
    env: Mapping[str, str],
    *,
    agent: Path,
    cwd: Path | None = None,
    cold_start: bool = False,
    log_path: Path | None = None,
    log_is_raw: bool = False,
) -> tuple[Launcher, str]:
    """The run's launcher and the one line that says which start mode is used and why."""
    if cold_start:
        return (
            ColdLauncher(python, "--cold-start"),
            "lk-eval: cold starts (--cold-start): one fresh interpreter per scenario",
        )
    try:
        server = ForkServer.start(
            python, env, cwd=cwd, agent=agent, log_path=log_path, log_is_raw=log_is_raw
        )
    except ForkServerError as exc:
        return (
            ColdLauncher(python, f"warm starts unavailable: {exc}"),
            f"lk-eval: cold starts: warm starts unavailable: {exc}",
        )
    return server, f"lk-eval: {server.describe()}"
