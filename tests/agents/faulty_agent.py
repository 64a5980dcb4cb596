"""A test agent that misbehaves on request: the scenario's userdata names the fault.

- ``{"fault": "raise_in_entrypoint"}``: the entrypoint raises before the session starts.
- ``{"fault": "exit_in_tool"}``: the ``explode`` tool kills the process mid-turn.
- the ``flood`` tool writes to stdout without end, the ``hog`` tool takes memory without
  end (lk-eval's --agent-log-limit and --agent-memory stop them).
- anything else: a plain echo-style agent on the local test LLM.
"""

from __future__ import annotations

import os
import sys
import time

from livekit.agents import Agent, AgentServer, AgentSession, JobContext, function_tool
from livekit.plugins import openai


class Plain(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are a terse test agent.")

    @function_tool
    async def explode(self) -> str:
        """Crash the agent process (a stand-in for a segfault or an OOM kill)."""
        os._exit(3)

    @function_tool
    async def flood(self) -> str:
        """Write to stdout without end (a runaway debug loop)."""
        line = "flooding the log " * 64 + "\n"
        while True:
            sys.stdout.write(line * 1024)

    @function_tool
    async def hog(self) -> str:
        """Take memory without end (a leak), each page touched so it is resident."""
        kept = []
        while True:
            kept.append(b"m" * (32 * 1024 * 1024))
            time.sleep(0.02)

    @function_tool
    async def lookup(self, key: str) -> str:
        """Look a key up."""
        if key == "bad":
            raise ValueError("no such key")
        return f"value of {key}"


server = AgentServer()


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    sim = ctx.simulation_context()
    fault = sim.userdata().get("fault") if sim is not None else None
    if fault == "raise_in_entrypoint":
        raise RuntimeError("entrypoint failed on purpose")
    session: AgentSession[None] = AgentSession(llm=openai.LLM(model="faulty-agent"))
    await session.start(agent=Plain(), room=ctx.room)
