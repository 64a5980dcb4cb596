"""A test agent with LiveKit's own turn detection, that notes whether it built the local
end-of-turn model.

The session's turn detection is the default (``AgentSession()`` without ``turn_handling``)
or, with ``{"turn_detection": "mini"}`` as the scenario's userdata, the local
``turn-detector-v1-mini`` named outright. Each constructed end-of-turn model
(``livekit.local_inference.EOT``, ~108 MB of weights loaded on first use) touches
``$TURN_DETECTOR_MARKS/<pid>.eot``; the entrypoint writes the detector's model to
``<pid>.model`` once the session started.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from livekit.agents import Agent, AgentServer, AgentSession, JobContext, inference
from livekit.agents.inference.eot import transports
from livekit.plugins import openai

MARKS = Path(os.environ["TURN_DETECTOR_MARKS"])
_EOT = transports._EOT


def _noted_eot(*args: Any, **kwargs: Any) -> Any:
    (MARKS / f"{os.getpid()}.eot").touch()
    return _EOT(*args, **kwargs)


transports._EOT = _noted_eot  # type: ignore[assignment,misc]

server = AgentServer()


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    sim = ctx.simulation_context()
    mini = sim is not None and sim.userdata().get("turn_detection") == "mini"
    llm = openai.LLM(model="turn-agent")
    session: AgentSession[None] = (
        AgentSession(
            llm=llm, turn_handling={"turn_detection": inference.TurnDetector(version="v1-mini")}
        )
        if mini
        else AgentSession(llm=llm)
    )
    await session.start(agent=Agent(instructions="You are a terse test agent."), room=ctx.room)
    detector = session.turn_detection
    (MARKS / f"{os.getpid()}.model").write_text(str(getattr(detector, "model", detector)))
