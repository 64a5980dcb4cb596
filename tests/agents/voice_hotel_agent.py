"""The example hotel agent (``examples/hotel/agent.py``) as a voice agent, for audio mode.

Its tools, handoff, userdata and ``on_simulation_end`` veto are the example's; its session
adds speech as LiveKit's examples configure it: LiveKit Inference STT and TTS
(``inference.STT("deepgram/nova-3")``, ``inference.TTS("cartesia/sonic-2")``), or with
``VOICE_HOTEL_SPEECH=openai`` the openai plugin's STT and TTS (through ``OPENAI_BASE_URL``).
VAD and the turn detector are the session's defaults (local models). Nothing here knows about
lk-eval: ``--speech local`` points the speech URLs at lk-eval's local speech server.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from livekit.agents import AgentServer, AgentSession, JobContext, inference
from livekit.plugins import openai


def _example() -> Any:
    path = Path(__file__).resolve().parents[2] / "examples" / "hotel" / "agent.py"
    spec = importlib.util.spec_from_file_location("hotel_example_agent", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


hotel = _example()
server = AgentServer()


def _speech() -> dict[str, Any]:
    if os.environ.get("VOICE_HOTEL_SPEECH") == "openai":
        return {"stt": openai.STT(model="whisper-1"), "tts": openai.TTS(model="tts-1")}
    return {
        "stt": inference.STT("deepgram/nova-3", language="en"),
        "tts": inference.TTS("cartesia/sonic-2"),
    }


@server.rtc_session(on_simulation_end=hotel.check_bookings)
async def entrypoint(ctx: JobContext) -> None:
    desk = hotel.Desk()
    sim = ctx.simulation_context()
    if sim is not None:
        desk.guest = str(sim.userdata().get("guest", ""))
    session: AgentSession[Any] = AgentSession(
        userdata=desk,
        llm=openai.LLM(model=os.environ.get("HOTEL_AGENT_MODEL", "gpt-4.1-mini")),
        **_speech(),
    )
    await session.start(agent=hotel.FrontDeskAgent(), room=ctx.room)
