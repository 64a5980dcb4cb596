"""The run's launcher: warm starts from a fork server, else cold starts, and the line saying why.

Kept apart from :mod:`lkeval.agents.fork_client` and :mod:`lkeval.agents.cold` because it is
the one place that chooses between the two behind the :class:`~lkeval.agents.interface.Launcher`
seam.

A run starts its launcher before its judge preflight (:func:`begin_launcher`, or adopts the
fork server ``lkeval run`` started in its first lines: :mod:`lkeval.run.early_start`) and takes
it once the first agent is due (:meth:`StartingLauncher.result`): the fork server's preload
(~2.9 s of its own CPU) overlaps lk-eval's own imports, checks and the preflight's LLM round
trips. A run that
stops before then (a failed preflight, a bad baseline, a signal) calls
:meth:`StartingLauncher.cancel`, which kills the server at once: nothing boots.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from lkeval.agents.cold import ColdLauncher
from lkeval.agents.fork_client import ForkServer, ForkServerError
from lkeval.agents.fork_start import ServerProcess
from lkeval.agents.interface import Launcher


class StartingLauncher:
    """A launcher on its way: a fork server preloading, or a cold launcher (nothing to wait
    for). Take it with :meth:`result`, or drop it with :meth:`cancel`."""

    def __init__(self, python: str, server: ForkServer | None, fallback: str = "") -> None:
        self._python = python
        self._server = server
        self._fallback = fallback  # why starts are cold, when there is no server
        self._taken = False

    def result(self) -> tuple[Launcher, str]:
        """Wait for the launcher (the fork server's preload); the launcher and the one line
        that says which start mode is used and why. The caller now owns it (``close``)."""
        self._taken = True
        server, self._server = self._server, None
        if server is None:
            return ColdLauncher(self._python, self._fallback), f"lk-eval: {_cold(self._fallback)}"
        try:
            server.wait_ready()
        except ForkServerError as exc:
            why = f"warm starts unavailable: {exc}"
            return ColdLauncher(self._python, why), f"lk-eval: cold starts: {why}"
        return server, f"lk-eval: {server.describe()}"

    def pending(self) -> bool:
        """Whether :meth:`result` would wait now (a fork server still preloading)."""
        return self._server is not None and self._server.preloading

    def cancel(self) -> None:
        """Stop a fork server that was not taken, at once (it may be mid-preload). Idempotent;
        nothing to do once :meth:`result` handed the launcher over."""
        server, self._server = self._server, None
        if server is not None and not self._taken:
            server.kill()


def _cold(why: str) -> str:
    if why == "--cold-start":
        return "cold starts (--cold-start): one fresh interpreter per scenario"
    return f"cold starts: {why}"


def begin_launcher(
    python: str,
    env: Mapping[str, str],
    *,
    agent: Path,
    cwd: Path | None = None,
    cold_start: bool = False,
    log_path: Path | None = None,
    log_is_raw: bool = False,
    started: ServerProcess | None = None,
) -> StartingLauncher:
    """Start the run's launcher without waiting for it: the fork server preloads meanwhile.
    ``started``: its process, started already with this ``python`` and ``env``
    (:mod:`lkeval.run.early_start`)."""
    if started is not None:
        return StartingLauncher(python, ForkServer.adopt(started, env))
    if cold_start:
        return StartingLauncher(python, None, "--cold-start")
    try:
        server = ForkServer.begin(
            python, env, cwd=cwd, agent=agent, log_path=log_path, log_is_raw=log_is_raw
        )
    except ForkServerError as exc:
        return StartingLauncher(python, None, f"warm starts unavailable: {exc}")
    return StartingLauncher(python, server)
