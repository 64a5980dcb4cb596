"""A test agent that holds one phase of a run for as long as a test needs (``HOLD_AT``).

- ``boot``: the agent's module never finishes importing (the agent is booting);
- ``conversation``: the reply to the caller's first turn never comes (a turn in progress);
- ``stopping``: its conversation goes as usual, and its job's shutdown never finishes (lk-eval
  has decided the attempt and is stopping the agent);
- anything else (or unset): greets and echoes the caller, with no LLM.

Heavy and slow as a test needs: with ``HOLD_MIB`` it holds that many MiB of its own memory from
its import on (written, so resident: an agent that loads a model), and with
``HOLD_REPLY_SECONDS`` each answer comes that late (an LLM's latency: agents live side by side).

It writes its pid to ``HOLD_MARK`` when it starts holding, so a test knows the run is in that
phase (no sleeps, no timing) before it signals lk-eval. With ``STAGE_MARK`` it writes there
which stage its job has reached: ``entrypoint`` (set up, about to start its session), then
``session`` (its session started: the greeting is under way).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterable
from pathlib import Path
from typing import Any

from livekit.agents import Agent, AgentServer, AgentSession, JobContext, llm
from livekit.plugins import openai

HOLD_AT = os.environ.get("HOLD_AT", "")
WEIGHTS = b"\x01" * (int(os.environ.get("HOLD_MIB", "0")) * 1024 * 1024)
REPLY_SECONDS = float(os.environ.get("HOLD_REPLY_SECONDS", "0"))


def _mark() -> None:
    Path(os.environ["HOLD_MARK"]).write_text(str(os.getpid()))


def _stage(stage: str) -> None:
    if os.environ.get("STAGE_MARK"):
        Path(os.environ["STAGE_MARK"]).write_text(stage)


if HOLD_AT == "boot" and os.environ.get("HOLD_MARK"):
    _mark()
    time.sleep(600)


class HeldAgent(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are a terse test agent. Repeat what you hear.")

    async def on_enter(self) -> None:
        _stage("session")
        self.session.generate_reply(instructions="Greet the caller.")

    async def llm_node(
        self, chat_ctx: llm.ChatContext, tools: list[Any], model_settings: Any
    ) -> AsyncIterable[str]:
        last = next((m for m in reversed(chat_ctx.items) if getattr(m, "role", "") == "user"), None)
        if last is None:
            yield "Welcome to the held desk."
            return
        if HOLD_AT == "conversation":
            _mark()
            await asyncio.sleep(600)
        await asyncio.sleep(REPLY_SECONDS)
        yield f"You said: {last.text_content}"


server = AgentServer()


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    # An LLM is configured (as in real agents) but llm_node above never calls it.
    session: AgentSession[None] = AgentSession(llm=openai.LLM(model="held-agent"))
    _stage("entrypoint")
    if HOLD_AT == "stopping":

        async def held_shutdown() -> None:
            _mark()
            await asyncio.sleep(600)

        ctx.add_shutdown_callback(held_shutdown)
    await session.start(agent=HeldAgent(), room=ctx.room)
