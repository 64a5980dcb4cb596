"""A test agent that gets stuck in a tool after starting a process that escapes its group.

The ``hang`` tool starts a helper that starts a sleeper with ``setsid`` (its own session and
process group, so signalling the agent's group misses it) and exits at once: the sleeper is the
agent's orphaned grandchild. Then the tool blocks the event loop for good (``time.sleep``), so
the agent cannot shut down gracefully either. With ``HUNG_PIDS_DIR`` set, the agent writes its
own pid (``<pid>.agent``) and the sleeper's (``<pid>.grandchild``) there once the tool runs, and
``<pid>.prewarmed`` from its server's prewarm, which lk-eval's host runs just before it says
``prepared`` (so a test knows the agent is prepared and waiting for its conversation slot).
With ``HUNG_TOOL_CRASH`` set, the tool exits the process instead of hanging (a crash that
leaves the sleeper behind).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from livekit.agents import Agent, AgentServer, AgentSession, JobContext, JobProcess, function_tool
from livekit.plugins import openai

SPAWN_SLEEPER = (
    "import subprocess, sys\n"
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],\n"
    "                     start_new_session=True, stdin=subprocess.DEVNULL,\n"
    "                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "print(p.pid)\n"
)


class Stuck(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are a terse test agent.")

    @function_tool
    async def hang(self) -> str:
        """Do something that never finishes."""
        helper = subprocess.run(
            [sys.executable, "-c", SPAWN_SLEEPER], capture_output=True, text=True, check=True
        )
        pids_dir = os.environ.get("HUNG_PIDS_DIR")
        if pids_dir:
            Path(pids_dir, f"{helper.stdout.strip()}.grandchild").touch()
            Path(pids_dir, f"{os.getpid()}.agent").touch()
        if os.environ.get("HUNG_TOOL_CRASH"):
            os._exit(3)  # dies on its own, leaving the sleeper behind
        time.sleep(600)  # blocks the event loop: no graceful shutdown either
        return "done"


def prewarm(proc: JobProcess) -> None:
    pids_dir = os.environ.get("HUNG_PIDS_DIR")
    if pids_dir:
        Path(pids_dir, f"{os.getpid()}.prewarmed").touch()


server = AgentServer(setup_fnc=prewarm)


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    session: AgentSession[None] = AgentSession(llm=openai.LLM(model="hung-agent"))
    await session.start(agent=Stuck(), room=ctx.room)
