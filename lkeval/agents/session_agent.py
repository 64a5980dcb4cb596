"""What an attempt uses of its agent, wherever that agent runs: the seam under ``run/``.

An agent process (:class:`~lkeval.agents.process.AgentProcess`: the LiveKit console over TCP,
cold or forked) and the agent in lk-eval's own interpreter (``lkeval dev``:
:class:`lkeval.inproc.agent.InProcessAgent`) both hand back the same
:class:`~lkeval.agents.protocol.SessionConnection`, so the conversation, checks, judges and
veto above this seam are one code path (docs/dev.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from lkeval.agents.interface import AgentProc, StartMode
from lkeval.agents.process import AgentLaunch
from lkeval.agents.protocol import SessionConnection


class SessionAgent(Protocol):
    """One attempt's agent: started to a connected session, raced, stopped."""

    boot_seconds: float | None
    started: StartMode | None
    inference_class: str
    marks_greeting: bool
    speed_patches: dict[str, str]

    @property
    def proc(self) -> AgentProc | None: ...

    async def start(
        self, boot_timeout: float, before_session: Callable[[], Awaitable[None]] | None = None
    ) -> SessionConnection:
        """Prepare the agent, await ``before_session`` (its conversation slot), connect."""
        ...

    async def stop(self, grace: float = 5.0) -> None:
        """Stop it, whatever state it is in; its log published (masked)."""
        ...

    async def wait_failure(self, poll: float = 0.1) -> str:
        """Resolve with a reason once the agent dies or its job crashes."""
        ...

    def ending_announced(self) -> bool:
        """Whether the agent said it is ending its session (it hangs up)."""
        ...

    def exit_reason(self) -> str:
        """How it ended, once it did."""
        ...

    def log_tail(self, lines: int = 30) -> tuple[str, ...]:
        """The last lines of its log."""
        ...


class AgentFactory(Protocol):
    """Makes one attempt's agent: ``AgentProcess`` itself, or the in-process player's."""

    def __call__(
        self,
        launch: AgentLaunch,
        dispatch: str | Path,
        log_path: Path,
        mock_tools: Mapping[str, Any] | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> SessionAgent: ...
