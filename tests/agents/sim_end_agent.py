"""A test agent that records every ``on_simulation_end`` call (tests/inproc/test_player.py).

Its replies are scripted in ``llm_node`` (no LLM server): it greets, then answers every line
with ``You said: LINE.``, and hangs up (``ctx.shutdown()``) on a line with "bye". Each
``on_simulation_end`` appends the provisional verdict it was
handed (``sim.simulator_verdict``) as a JSON line to ``$SIM_END_LOG``, and vetoes when the
scenario's ``userdata.veto`` says so. ``userdata.crash`` makes the entrypoint raise before its
session starts.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterable
from typing import Any

from livekit.agents import (
    Agent,
    AgentServer,
    AgentSession,
    JobContext,
    SimulationContext,
    get_job_context,
    llm,
)
from livekit.plugins import openai


class EchoAgent(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You repeat what the caller says.")

    async def on_enter(self) -> None:
        await self.session.generate_reply(instructions="Greet the caller.")

    async def llm_node(
        self, chat_ctx: llm.ChatContext, tools: list[Any], model_settings: Any
    ) -> AsyncIterable[Any]:
        last = next((m for m in reversed(chat_ctx.items) if getattr(m, "role", "") == "user"), None)
        if last is not None and "bye" in (last.text_content or ""):
            get_job_context().shutdown("the caller said bye")  # hangs up
            yield "Goodbye."
            return
        yield "Hello, echo desk." if last is None else f"You said: {last.text_content}."


logger = logging.getLogger("sim-end-agent")


async def record_end(sim: SimulationContext) -> None:
    verdict = sim.simulator_verdict
    with open(os.environ["SIM_END_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"success": verdict.success, "reason": verdict.reason}) + "\n")
    veto = sim.userdata().get("veto")
    if veto:
        sim.fail(str(veto))


server = AgentServer()


@server.rtc_session(on_simulation_end=record_end)
async def entrypoint(ctx: JobContext) -> None:
    sim = ctx.simulation_context()
    if sim is not None and sim.userdata().get("crash"):
        raise RuntimeError("the echo desk is closed")
    logger.info("echo desk open for %s", ctx.job.id)
    session: AgentSession[None] = AgentSession(
        llm=openai.LLM(model="echo", base_url="http://127.0.0.1:1/v1", api_key="unused")
    )
    await session.start(agent=EchoAgent(), room=ctx.room)
