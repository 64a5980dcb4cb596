"""Bench agent for bench/verdict_trust.py: a one-line desk agent that is fine or broken by chance.

Each conversation draws its mode once: broken with probability ``fail_rate`` (the scenario's
userdata, else ``VERDICT_AGENT_FAIL_RATE``, else 0). A broken conversation's instructions say
so, the local LLM's rules make the reply carry the marker ``ZX-REGRESSED``, and the judge's rules
fail exactly those transcripts: the truth of every conversation is known, so every verdict the
noisy judge gets wrong can be counted. The draw uses the OS's randomness: forked agents inherit
their parent's ``random`` state and would all draw the same. With ``VERDICT_AGENT_LOG`` set,
each conversation appends its scenario (userdata ``scenario``) and mode to that file, so the
bench can check the attempts lk-eval recorded against the conversations the agent had.
"""

from __future__ import annotations

import os
import random

from livekit.agents import Agent, AgentServer, AgentSession, JobContext
from livekit.plugins import openai

_DRAW = random.SystemRandom()


class DeskAgent(Agent):
    async def on_enter(self) -> None:
        # Most real agents greet; one that does not makes lk-eval wait out the greeting.
        await self.session.generate_reply(instructions="Greet the caller.")


server = AgentServer()


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    sim = ctx.simulation_context()
    data = sim.userdata() if sim is not None else {}
    fail_rate = float((data or {}).get("fail_rate", os.environ.get("VERDICT_AGENT_FAIL_RATE", "0")))
    mode = "broken" if _DRAW.random() < fail_rate else "fine"
    log = os.environ.get("VERDICT_AGENT_LOG")
    if log:  # one short O_APPEND write per conversation: atomic across agent processes
        with open(log, "a", encoding="utf-8") as file:
            file.write(f"{(data or {}).get('scenario', '?')} {mode}\n")
    session: AgentSession[None] = AgentSession(llm=openai.LLM(model="bench-agent"))
    agent = DeskAgent(instructions=f"You are the help desk. MODE {mode}.")
    await session.start(agent=agent, room=ctx.room)
