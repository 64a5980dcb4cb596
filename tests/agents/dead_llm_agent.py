"""A test agent whose own LLM is unreachable (point ``OPENAI_BASE_URL`` at a closed port).

LiveKit retries the LLM (``max_retry`` times, ``retry_interval`` apart; ~4 s with its defaults)
and then reports an unrecoverable ``llm_error``. What happens next depends on the agent:

- ``DEAD_LLM_SESSION=close`` (default): ``max_unrecoverable_errors=0``, so the first failure
  (the greeting) makes the AgentSession close with "AgentSession is closing due to
  unrecoverable error" before the caller ever speaks.
- ``DEAD_LLM_SESSION=stay``: a high ``max_unrecoverable_errors``, so the session stays up and
  every reply fails: the greeting first, then each caller turn (run_input answers with no
  assistant message; an ``error`` event comes with each failure).

``DEAD_LLM_RETRIES`` and ``DEAD_LLM_RETRY_INTERVAL`` shorten LiveKit's retries for fast tests
(defaults: LiveKit's own, 3 and 2.0 s).
"""

from __future__ import annotations

import os

from livekit.agents import (
    Agent,
    AgentServer,
    AgentSession,
    APIConnectOptions,
    JobContext,
)
from livekit.agents.voice.agent_session import SessionConnectOptions
from livekit.plugins import openai

CLOSE = os.environ.get("DEAD_LLM_SESSION", "close") == "close"


class Receptionist(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are a receptionist. Greet callers and help them.")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="Greet the caller.")


server = AgentServer()


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    llm_options = APIConnectOptions(
        max_retry=int(os.environ.get("DEAD_LLM_RETRIES", "3")),
        retry_interval=float(os.environ.get("DEAD_LLM_RETRY_INTERVAL", "2.0")),
    )
    session: AgentSession[None] = AgentSession(
        llm=openai.LLM(model="dead-llm-agent"),
        conn_options=SessionConnectOptions(
            llm_conn_options=llm_options, max_unrecoverable_errors=0 if CLOSE else 1000
        ),
    )
    await session.start(agent=Receptionist(), room=ctx.room)
