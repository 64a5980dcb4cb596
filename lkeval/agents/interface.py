"""The launcher seam: how an agent process comes to exist, cold or forked, behind one protocol.

:class:`~lkeval.agents.process.AgentProcess` owns an agent from spawn to exit and does not care
how it was started. A :class:`Launcher` starts one: :class:`~lkeval.agents.cold.ColdLauncher`
(a fresh interpreter) or :class:`~lkeval.agents.fork_client.ForkServer` (forked from a
preloaded server). Both run the same host (``agent_host.py``) with the same argv, environment,
working directory, log file and control channel, so everything after the spawn is the same.
A launcher that cannot start an agent raises :class:`LaunchError`; the process then falls back
to a cold start and records why (:class:`StartMode`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol


class LaunchError(Exception):
    """This launcher cannot start this agent (unsupported, gone, or refused the spawn)."""


class AgentProc(Protocol):
    """What lk-eval uses of a running agent: ``asyncio.subprocess.Process`` (cold) or
    :class:`~lkeval.agents.fork_client.ForkedProcess` (warm)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...


@dataclass(frozen=True)
class SpawnRequest:
    """Everything a launcher needs to start one agent host.

    ``host_args`` follow the host script (agent file, ``--connect-addr``, ``--control-fd``);
    ``control_fd`` is the host's end of the control channel, which the new process inherits
    under the same number.
    """

    agent: Path
    host_args: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path
    log_path: Path
    control_fd: int


class Launcher(Protocol):
    """Starts agent hosts; ``mode`` says how ("warm" or "cold")."""

    @property
    def mode(self) -> Literal["warm", "cold"]: ...

    async def spawn(self, request: SpawnRequest) -> AgentProc:
        """Start one agent host; raises :class:`LaunchError` when this launcher cannot."""
        ...

    def close(self) -> None:
        """Stop the launcher; agents it started and that still run are killed."""
        ...


@dataclass(frozen=True)
class StartMode:
    """How one agent was started: warm, or cold and why (results keep both per attempt)."""

    mode: Literal["warm", "cold"]
    why: str = ""

    def describe(self) -> str:
        """``warm`` or ``cold (why)``, for log lines."""
        return f"{self.mode} ({self.why})" if self.why else self.mode
