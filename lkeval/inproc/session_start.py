"""What the in-process player changes in livekit-agents, installed once per interpreter.

- ``AgentSession.start``: while a scenario plays (:func:`playing`), the session is started
  without the (mock) room, so it runs text only (the scenario's text simulation turns STT,
  TTS and VAD off), and its first session is handed to the player, which holds it until the
  scenario's conversation slot opens and then serves it over LiveKit's own ``SessionHost``,
  the code that serves the console. Outside a scenario it is livekit's ``start`` unchanged.
- ``JobContext.shutdown``, ``AgentSession.shutdown`` and ``AgentSession.aclose`` tell the
  player the agent is ending its session, as the console's host tells lk-eval
  (``control.announce_ending``).
- Each tool's schema is built once, not per LLM request (``host/tool_schemas.py``), and the
  session marks the end of its greeting (``host/greeting_mark.py``), as in an agent process.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from lkeval.host import agent_host, control, greeting_mark, tool_schemas


class Player(Protocol):
    """The scenario playing now (:class:`lkeval.inproc.agent.InProcessAgent`)."""

    session: Any

    async def serve(
        self, session: Any, start: Callable[..., Awaitable[Any]], args: Any, kwargs: Any
    ) -> Any:
        """Hold the session until the slot opens, start it, serve it; start's result."""
        ...

    def announce_ending(self) -> None: ...


class _Current:
    """The one scenario playing in this interpreter (one at a time: the job context and the
    patches are the process's)."""

    player: Player | None = None

    def announce_ending(self) -> None:
        if self.player is not None:
            self.player.announce_ending()


CURRENT = _Current()


@functools.cache
def install() -> tuple[dict[str, str], bool]:
    """Install the patches (once): the speed patches as results record them, and whether the
    session marks the end of its greeting."""
    from livekit.agents import AgentSession

    schemas = tool_schemas.install()
    marks_greeting = greeting_mark.install()
    control.announce_ending(CURRENT)  # type: ignore[arg-type]
    original: Callable[..., Awaitable[Any]] = AgentSession.start

    @functools.wraps(original)
    async def start(self: Any, *args: Any, **kwargs: Any) -> Any:
        player = CURRENT.player
        if player is None:
            return await original(self, *args, **kwargs)
        kwargs.pop("room", None)  # no RoomIO: text in, text out, no room connection
        if player.session is None:
            return await player.serve(self, original, args, kwargs)
        return await original(self, *args, **kwargs)

    AgentSession.start = start  # type: ignore[method-assign]
    return {"tool_schemas": schemas.describe()}, marks_greeting


@functools.cache
def inference_class(wanted: str) -> str:
    """The LiveKit Inference class the agent's calls run at (``agent_host``'s rule), set once
    per interpreter: the first scenario's ``--inference-class`` holds for the process."""
    return agent_host.set_inference_class(wanted)
