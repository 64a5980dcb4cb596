"""One agent, many ways to be broken: the scenario's ``userdata.broken`` picks one.

The false-pass matrix (tests/e2e/test_false_pass.py) plays every way in ONE ``lkeval run``, so the
modes are chosen per scenario from userdata rather than from the environment. Each mode is a
behaviour seen in real LiveKit agents (docs/protocol.md; docs/testing.md, "What real agents do"):

- ``healthy`` (or no userdata): greets, then echoes the caller ("You said: ...").
- ``dead_llm_close``: its LLM is unreachable (``userdata.llm_url``, default a closed port);
  the greeting fails and the AgentSession closes ("unrecoverable error") before any turn.
- ``dead_llm_stay``: the same LLM, but the session stays up and every reply fails.
- ``silent``: never produces an assistant message (run_input answers ``[]``).
- ``crash_after_greeting``: greets, then the process dies (``os._exit(70)``).
- ``crash_in_turn``: the first caller turn calls a tool that kills the process.
- ``sim_end_raises``: ``on_simulation_end`` raises, so ``finalize_simulation`` answers an error.
- ``shutdown_mid``: a caller message containing "bye" makes the agent reply, then call
  ``ctx.shutdown()`` in the middle of the conversation.
- ``shutdown_slow``: as ``shutdown_mid``, but its session takes 1.5 s to close (an ``on_exit``
  that waits, as a loaded machine would), so its connection closes well after the turn ends.
- ``hang_after_tool``: the first caller turn calls ``lookup`` (which answers), then the agent's
  reply never comes: the turn times out after a tool call it made. When the reply hangs (the
  tool's call and output are in the chat context, their events sent) it writes the file
  ``userdata.marker`` when given, so a test knows the turn got there.
- ``veto``: a healthy conversation that ``on_simulation_end`` vetoes.
- ``greet_late``: ``on_enter`` awaits a lookup (0.5 s) before it greets, as agents that load a
  caller's profile first do; its session reports listening before thinking.
- ``greet_from_entrypoint``: no ``on_enter`` greeting; the entrypoint greets right after
  ``session.start`` returns, as many of LiveKit's examples do.
- ``on_enter_waits``: ``on_enter`` neither greets nor returns (it waits for an event that never
  comes); the caller's turns are answered all the same.
- ``whitespace``: every message it produces, greeting included, is only whitespace.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterable
from pathlib import Path
from typing import Any

from livekit.agents import (
    Agent,
    AgentServer,
    AgentSession,
    APIConnectOptions,
    JobContext,
    SimulationContext,
    function_tool,
    llm,
)
from livekit.agents.voice.agent_session import SessionConnectOptions
from livekit.agents.voice.events import ConversationItemAddedEvent
from livekit.plugins import openai

GREETING = "Welcome to the broken desk. How can I help?"
DEAD_LLM_URL = "http://127.0.0.1:1/v1"  # nothing listens on port 1: connection refused


class BrokenAgent(Agent):
    def __init__(self, mode: str, marker: str | None = None) -> None:
        super().__init__(instructions="You are a terse test agent. Repeat what you hear.")
        self.mode = mode
        self.marker = marker

    async def on_enter(self) -> None:
        if self.mode in ("silent", "greet_from_entrypoint"):
            return
        if self.mode == "greet_late":
            await asyncio.sleep(0.5)  # the caller's profile, from a slow database
        if self.mode == "on_enter_waits":
            await asyncio.Event().wait()
        handle = self.session.generate_reply(instructions="Greet the caller.")
        if self.mode == "crash_after_greeting":
            await handle
            os._exit(70)

    async def on_exit(self) -> None:
        if self.mode == "shutdown_slow":
            await asyncio.sleep(1.5)

    @function_tool
    async def explode(self) -> str:
        """Crash the agent process (a stand-in for a segfault or an OOM kill)."""
        os._exit(3)

    @function_tool
    async def lookup(self, key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    async def llm_node(
        self, chat_ctx: llm.ChatContext, tools: list[Any], model_settings: Any
    ) -> AsyncIterable[Any]:
        if self.mode.startswith("dead_llm"):  # the real LLM path, against a dead endpoint
            async for chunk in Agent.default.llm_node(self, chat_ctx, tools, model_settings):
                yield chunk
            return
        if self.mode == "silent":
            return
        if self.mode == "whitespace":
            yield " \n\t "
            return
        last = next((m for m in reversed(chat_ctx.items) if getattr(m, "role", "") == "user"), None)
        if last is None:
            yield GREETING
            return
        called = any(getattr(i, "type", "") == "function_call" for i in chat_ctx.items[-3:])
        if self.mode == "hang_after_tool" and called:
            if self.marker:
                Path(self.marker).write_text("hanging", encoding="utf-8")
            await asyncio.Event().wait()  # a reply stuck on a dead backend
        if self.mode in ("crash_in_turn", "hang_after_tool") and not called:
            name = "explode" if self.mode == "crash_in_turn" else "lookup"
            call = llm.FunctionToolCall(name=name, arguments='{"key": "x"}', call_id="call_1")
            yield llm.ChatChunk(id="broken-1", delta=llm.ChoiceDelta(tool_calls=[call]))
            return
        yield f"You said: {last.text_content}"


async def on_simulation_end(sim: SimulationContext) -> None:
    """The agent's own verdict, broken on request."""
    mode = sim.userdata().get("broken", "healthy")
    if mode == "sim_end_raises":
        raise RuntimeError("grading failed: no such table: bookings")
    if mode == "veto":
        sim.fail("the booking was never written")


server = AgentServer()


@server.rtc_session(on_simulation_end=on_simulation_end)
async def entrypoint(ctx: JobContext) -> None:
    sim = ctx.simulation_context()
    userdata = sim.userdata() if sim is not None else {}
    mode = str(userdata.get("broken", "healthy"))
    retries = APIConnectOptions(max_retry=1, retry_interval=0.1)
    session: AgentSession[None] = AgentSession(
        llm=openai.LLM(
            model="broken-agent",
            base_url=str(userdata.get("llm_url", DEAD_LLM_URL)),
            api_key="not-a-key",
        ),
        conn_options=SessionConnectOptions(
            llm_conn_options=retries,
            max_unrecoverable_errors=0 if mode == "dead_llm_close" else 1000,
        ),
    )

    def on_item(ev: ConversationItemAddedEvent) -> None:
        text = (getattr(ev.item, "text_content", "") or "").lower()
        is_reply = getattr(ev.item, "role", "") == "assistant"
        if mode in ("shutdown_mid", "shutdown_slow") and is_reply and "bye" in text:
            ctx.shutdown(reason="the caller said goodbye")

    session.on("conversation_item_added", on_item)
    marker = userdata.get("marker")
    await session.start(agent=BrokenAgent(mode, str(marker) if marker else None), room=ctx.room)
    if mode == "greet_from_entrypoint":
        await session.generate_reply(instructions="Greet the caller.")
