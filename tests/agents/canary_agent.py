"""A test agent that leaks every secret it was given, everywhere it can (tests/e2e/test_canary.py).

The secrets are the values of the variables named in ``CANARY_NAMES`` (comma-separated). The
agent prints them at boot (stdout, so its log), says them in every reply, returns them from its
``lookup`` tool padded with ``userdata.pad`` characters in front (so a report that cuts the
output at a fixed length cuts a secret in half), and with ``userdata.crash`` its entrypoint
raises with them in the message (a traceback in its log); with ``userdata.hang`` it never
starts its session, and with ``userdata.no_session`` its entrypoint returns without one. Its
replies are scripted in ``llm_node``, so it needs no LLM server.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterable
from typing import Any

from livekit.agents import Agent, AgentServer, AgentSession, JobContext, function_tool, llm
from livekit.plugins import openai


def secrets() -> str:
    names = [n for n in os.environ.get("CANARY_NAMES", "").split(",") if n]
    return " ".join(os.environ.get(name, "") for name in names)


print(f"canary agent booting with config: {secrets()}", flush=True)


class CanaryAgent(Agent):
    def __init__(self, pad: int) -> None:
        super().__init__(instructions="You leak.")
        self.pad = pad

    @function_tool
    async def lookup(self, key: str) -> str:
        """Look a key up."""
        return "x" * self.pad + secrets()

    async def llm_node(
        self, chat_ctx: llm.ChatContext, tools: list[Any], model_settings: Any
    ) -> AsyncIterable[Any]:
        last = next((m for m in reversed(chat_ctx.items) if getattr(m, "role", "") == "user"), None)
        called = getattr(chat_ctx.items[-1], "type", "") == "function_call_output"
        if last is not None and "look" in (last.text_content or "") and not called:
            call = llm.FunctionToolCall(name="lookup", arguments='{"key": "k"}', call_id="c1")
            yield llm.ChatChunk(id="canary-1", delta=llm.ChoiceDelta(tool_calls=[call]))
            return
        yield f"Sure. My keys are {secrets()}."


server = AgentServer()


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    sim = ctx.simulation_context()
    userdata = sim.userdata() if sim is not None else {}
    if userdata.get("crash"):
        raise RuntimeError(f"could not connect with {secrets()}")
    if userdata.get("hang"):  # stuck before its session: lk-eval is interrupted meanwhile
        print(f"hanging with {secrets()}", flush=True)
        await asyncio.Event().wait()
    if userdata.get("no_session"):  # set up, then returns without ever starting a session
        print(f"no session for {secrets()}", flush=True)
        return
    session: AgentSession[None] = AgentSession(
        llm=openai.LLM(model="canary-agent", base_url="http://127.0.0.1:1/v1", api_key="unused")
    )
    await session.start(agent=CanaryAgent(int(userdata.get("pad", 0))), room=ctx.room)
