"""A test agent for the edge cases a merge gate must not pass; ``EDGE_AGENT`` picks one.

- ``burst`` (default): a fixed greeting with ``session.say`` and no LLM, so the whole greeting
  (agent states thinking -> listening -> speaking, the message, -> listening) is emitted at
  once, as LiveKit's example agents with a zero-latency model do. Replies echo the caller.
- ``silent``: never produces an assistant message: no greeting, and its ``llm_node`` yields
  nothing (an agent that decides, or is broken into, never speaking). run_input answers [].
- ``crash_after_greeting``: greets, then the process dies at once (``os._exit``, like a
  segfault or an OOM kill) before the caller's first turn.

Every variant starts its session the normal way, so turn 0 carries LiveKit's session-start
handoff event (none -> this agent) before anything else.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterable
from typing import Any

from livekit.agents import Agent, AgentServer, AgentSession, JobContext, llm
from livekit.plugins import openai

GREETING = "Welcome to the edge desk. How can I help?"
MODE = os.environ.get("EDGE_AGENT", "burst")


class EdgeAgent(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are a terse test agent. Repeat what you hear.")

    async def on_enter(self) -> None:
        if MODE == "silent":
            return
        handle = self.session.generate_reply(instructions="Greet the caller.")
        if MODE == "crash_after_greeting":
            await handle
            os._exit(70)

    async def llm_node(
        self, chat_ctx: llm.ChatContext, tools: list[Any], model_settings: Any
    ) -> AsyncIterable[str]:
        if MODE == "silent":
            return
        last = next((m for m in reversed(chat_ctx.items) if getattr(m, "role", "") == "user"), None)
        yield f"You said: {last.text_content}" if last is not None else GREETING


server = AgentServer()


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    # An LLM is configured (as in real agents) but llm_node above never calls it.
    session: AgentSession[None] = AgentSession(llm=openai.LLM(model="edge-agent"))
    await session.start(agent=EdgeAgent(), room=ctx.room)
