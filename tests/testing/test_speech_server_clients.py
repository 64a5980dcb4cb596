"""LiveKit's own clients against the local speech server: proof that an unmodified agent's
``inference.STT``/``inference.TTS`` and the openai plugin's STT/TTS work with it."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from livekit import rtc
from livekit.agents import inference, stt
from livekit.plugins import openai
from speech_client import line_audio, run

from lkeval.audio import FRAME_BYTES, FRAME_SAMPLES, WIRE_RATE
from lkeval.audio.pcm import frames
from lkeval.testing.speech_server import SpeechServer

LINE = "Can I get a late checkout tomorrow?"
SECRET = "a-test-secret-long-enough-for-hs256-signing"


def wire_frames(pcm: bytes) -> list[rtc.AudioFrame]:
    return [
        rtc.AudioFrame(
            data=f, sample_rate=WIRE_RATE, num_channels=1, samples_per_channel=FRAME_SAMPLES
        )
        for f in frames(pcm)
    ]


def test_livekit_inference_stt_hears_the_oracle_line() -> None:
    async def body() -> tuple[list[Any], list[str]]:
        server = SpeechServer()
        await server.start()
        try:
            server.expect_line("k", LINE)
            speech = await line_audio(LINE, WIRE_RATE)
            async with aiohttp.ClientSession() as http:
                recognizer = inference.STT(
                    model="deepgram/nova-3",
                    base_url=server.url_for("k"),
                    api_key="key",
                    api_secret=SECRET,
                    http_session=http,
                )
                stream = recognizer.stream()
                for frame in wire_frames(bytes(FRAME_BYTES * 10) + speech + bytes(WIRE_RATE * 2)):
                    stream.push_frame(frame)
                stream.end_input()
                events = [event async for event in stream]
                await stream.aclose()
            return events, server.heard("k")
        finally:
            await server.stop()

    events, heard = run(body)
    finals = [e for e in events if e.type == stt.SpeechEventType.FINAL_TRANSCRIPT]
    assert [e.alternatives[0].text for e in finals] == [LINE]
    types = [e.type for e in events]
    assert types.index(stt.SpeechEventType.START_OF_SPEECH) < types.index(
        stt.SpeechEventType.FINAL_TRANSCRIPT
    )
    assert stt.SpeechEventType.END_OF_SPEECH in types
    assert heard == [LINE]


def test_livekit_inference_tts_speaks_through_the_server() -> None:
    async def body() -> tuple[list[rtc.AudioFrame], list[str]]:
        server = SpeechServer()
        await server.start()
        try:
            async with aiohttp.ClientSession() as http:
                tts = inference.TTS(
                    model="cartesia/sonic-3",
                    voice="a-cartesia-voice-id",
                    base_url=server.url_for("k"),
                    api_key="key",
                    api_secret=SECRET,
                    http_session=http,
                )
                out = [ev.frame async for ev in tts.synthesize("Welcome. Your room is ready.")]
                await tts.aclose()
            return out, server.spoken("k")
        finally:
            await server.stop()

    out, spoken = run(body)
    seconds = sum(f.samples_per_channel for f in out) / out[0].sample_rate
    assert 1.0 < seconds < 6.0
    assert out[0].sample_rate == 24000
    assert " ".join(spoken) == "Welcome. Your room is ready."


@pytest.mark.parametrize("tts_format", ["mp3", "pcm"])
def test_the_openai_plugin_speaks_and_transcribes_through_the_server(tts_format: str) -> None:
    async def body() -> tuple[list[rtc.AudioFrame], str]:
        server = SpeechServer()
        await server.start()
        try:
            url = server.openai_url_for("k")
            tts = openai.TTS(
                base_url=url, api_key="k", model="gpt-4o-mini-tts", response_format=tts_format
            )  # type: ignore[arg-type]
            out = [ev.frame async for ev in tts.synthesize(LINE)]
            server.expect_line("k", LINE)
            recognizer = openai.STT(base_url=url, api_key="k", model="whisper-1")
            event = await recognizer.recognize(out)
            return out, event.alternatives[0].text
        finally:
            await server.stop()

    out, heard = run(body)
    assert sum(f.samples_per_channel for f in out) / out[0].sample_rate > 1.0
    assert heard == LINE


def test_livekits_cloud_turn_detector_falls_back_to_its_local_model() -> None:
    # /eot answers 404: the agent's end-of-turn decisions then come from turn-detector-v1-mini,
    # the model that ships in livekit-local-inference, instead of failing its turns.
    detector_module = pytest.importorskip(
        "livekit.agents.inference.eot.detector",
        reason="this livekit-agents has no cloud turn detector (it runs the local model only)",
    )

    async def body() -> tuple[str, bool, str]:
        server = SpeechServer()
        await server.start()
        try:
            async with aiohttp.ClientSession() as http:
                detector = detector_module.TurnDetector(
                    version="v1",
                    base_url=server.url_for("k"),
                    api_key="key",
                    api_secret=SECRET,
                    http_session=http,
                )
                asked = detector.model  # the cloud model: LIVEKIT_INFERENCE_URL is set
                stream = detector.stream()
                for _ in range(200):
                    if stream.is_fallback:
                        break
                    await asyncio.sleep(0.05)
                result = (asked, stream.is_fallback, stream.model)
                await stream.aclose()
                return result
        finally:
            await server.stop()

    asked, fell_back, used = run(body)
    assert (asked, fell_back, used) == ("turn-detector-v1", True, "turn-detector-v1-mini")
