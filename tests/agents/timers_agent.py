"""A test agent that tells which of the framework's timers run in its process
(tests/e2e/test_agent_timers.py; lkeval/host/idle_timers.py).

Every reply is one JSON object: the names of the process's threads, the coroutine the process
pool's main task runs, and whether the server's load task was cancelled. With
``userdata.crash`` its entrypoint raises once its session has started (after ``go``), so its job
crashes mid-conversation. Its replies are scripted in ``llm_node``: it needs no LLM server.
"""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import AsyncIterable
from typing import Any

from livekit.agents import Agent, AgentServer, AgentSession, JobContext, llm
from livekit.plugins import openai


def timers() -> dict[str, Any]:
    """What runs in this process, read from the live objects (the server is found by gc)."""
    found = next(o for o in gc.get_objects() if isinstance(o, AgentServer) and o is server)
    pool_task = found._proc_pool._main_atask
    return {
        "threads": sorted(t.name for t in threading.enumerate()),
        "pool_coroutine": pool_task.get_coro().__qualname__,
        "pool_done": pool_task.done(),
        "load_task_cancelled": found._load_task.cancelled(),
    }


class TimersAgent(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You report your timers.")

    async def llm_node(
        self, chat_ctx: llm.ChatContext, tools: list[Any], model_settings: Any
    ) -> AsyncIterable[Any]:
        yield json.dumps(timers())


server = AgentServer()


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    sim = ctx.simulation_context()
    userdata = sim.userdata() if sim is not None else {}
    session: AgentSession[None] = AgentSession(
        llm=openai.LLM(model="timers-agent", base_url="http://127.0.0.1:1/v1", api_key="unused")
    )
    await session.start(agent=TimersAgent(), room=ctx.room)
    if userdata.get("crash"):
        raise RuntimeError("the timers agent's job crashed on purpose")
