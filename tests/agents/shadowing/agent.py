"""An agent whose sibling modules share their names with lk-eval's host modules.

Real agents use generic top-level module names (``context``, ``common``, ``protocol``). lk-eval
runs its host and fork server by path from ``lkeval/host/``, whose modules are named
``tape``, ``pins``, ``siblings``, ``agent_host``, ``fork_server`` ...: if that directory
stayed on ``sys.path`` (or a host module stayed in ``sys.modules`` under its plain name), these
imports would get lk-eval's modules, which have no ``WHO``, and the agent would fail to import.
"""

from __future__ import annotations

import agent_host
import fork_server
import pins
import siblings
import tape
from livekit.agents import Agent, AgentServer, AgentSession, JobContext
from livekit.plugins import openai

OWNERS = {
    m.__name__: getattr(m, "WHO", m.__file__)
    for m in (agent_host, fork_server, pins, siblings, tape)
}
if set(OWNERS.values()) != {"agent"}:
    raise ImportError(f"shadowed by lk-eval's own modules: {OWNERS}")

server = AgentServer()


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    session: AgentSession[None] = AgentSession(llm=openai.LLM(model="shadowing-agent"))
    await session.start(agent=Agent(instructions="You are a terse test agent."), room=ctx.room)
