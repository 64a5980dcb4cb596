"""The caller's voice: espeak-ng, an OpenAI-compatible endpoint, LiveKit Inference; the cache."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import jwt
import numpy as np
import pytest
from speech_client import run

from lkeval.audio import WIRE_RATE, SpeechError
from lkeval.audio.remote_voice import inference_token
from lkeval.audio.voice import CachedVoice, EspeakVoice, build_voice
from lkeval.testing.speech_server import SpeechServer

LINE = "Hi, I'm calling about my reservation."
SECRET = "a-test-secret-long-enough-for-hs256-signing"


def test_espeak_speaks_48_khz_without_padding_and_the_same_every_time() -> None:
    async def body() -> tuple[bytes, bytes]:
        return await EspeakVoice().speak(LINE), await EspeakVoice().speak(LINE)

    first, second = run(body)
    assert first == second
    samples = np.frombuffer(first, dtype="<i2")
    assert 1.5 < samples.size / WIRE_RATE < 5.0
    # espeak-ng pads ~0.4 s of silence at the end: trimmed, so "stopped speaking" is exact.
    assert abs(int(samples[0])) > 64 and abs(int(samples[-1])) > 64


def test_a_line_that_looks_like_a_flag_is_spoken_not_parsed() -> None:
    audio = run(lambda: EspeakVoice().speak("--help me please"))
    assert len(audio) / 2 / WIRE_RATE > 0.5


@dataclass
class CountingVoice:
    calls: list[str] = field(default_factory=list)
    fail_first: bool = False

    async def speak(self, text: str) -> bytes:
        self.calls.append(text)
        await asyncio.sleep(0.01)
        if self.fail_first and len(self.calls) == 1:
            raise SpeechError("first call fails")
        return text.encode()


def test_the_cache_synthesizes_each_line_once_even_when_asked_at_once() -> None:
    inner = CountingVoice()
    voice = CachedVoice(inner, name="counting")

    async def body() -> list[bytes]:
        return await asyncio.gather(voice.speak("a"), voice.speak("a"), voice.speak("b"))

    assert run(body) == [b"a", b"a", b"b"]
    assert run(lambda: voice.speak("a")) == b"a"
    assert inner.calls == ["a", "b"]
    assert voice.cached_lines == 2


def test_a_failed_line_is_not_cached() -> None:
    inner = CountingVoice(fail_first=True)
    voice = CachedVoice(inner, name="counting")
    with pytest.raises(SpeechError):
        run(lambda: voice.speak("a"))
    assert run(lambda: voice.speak("a")) == b"a"
    assert inner.calls == ["a", "a"]


@pytest.mark.parametrize(
    ("spec", "env", "message"),
    [
        ("festival", {}, "unknown engine 'festival'"),
        ("openai", {"OPENAI_API_KEY": "sk-x"}, "needs a model"),
        ("openai:tts-1", {}, "LKEVAL_VOICE_API_KEY or OPENAI_API_KEY"),
        ("inference:cartesia/sonic-3", {"LIVEKIT_API_KEY": "k"}, "LIVEKIT_API_SECRET"),
        ("espeak:en us;rm", {}, "is not a model or voice name"),
    ],
)
def test_bad_voice_specs_name_the_problem(spec: str, env: dict[str, str], message: str) -> None:
    with pytest.raises(SpeechError, match=message):
        build_voice(spec, env)


def test_keys_never_show_in_a_voice_or_its_errors() -> None:
    env = {
        "LIVEKIT_API_KEY": "lk-key-VALUE",
        "LIVEKIT_API_SECRET": "lk-secret-VALUE",
        "LIVEKIT_INFERENCE_URL": "http://127.0.0.1:9/v1",
        "OPENAI_API_KEY": "sk-VALUE",
    }
    for spec in ("inference:cartesia/sonic-3:v", "openai:tts-1:alloy"):
        voice = build_voice(spec, env)
        with pytest.raises(SpeechError) as caught:
            run(lambda voice=voice: voice.speak("hello"))  # port 9: connection refused
        shown = f"{voice!r} {voice.inner!r} {caught.value}"
        assert "VALUE" not in shown, shown


def test_the_inference_token_is_a_livekit_inference_grant() -> None:
    claims = jwt.decode(inference_token("api-key", SECRET), SECRET, algorithms=["HS256"])
    assert claims["iss"] == "api-key"
    assert claims["inference"] == {"perform": True}
    assert claims["exp"] - claims["nbf"] == 600


@pytest.mark.parametrize("spec", ["openai:tts-1:alloy", "inference:cartesia/sonic-3:voice-id"])
def test_remote_voices_speak_through_a_compatible_server(spec: str) -> None:
    async def body() -> tuple[bytes, list[str]]:
        server = SpeechServer()
        await server.start()
        try:
            env = {
                "OPENAI_BASE_URL": server.openai_url_for("caller"),
                "OPENAI_API_KEY": "sk-test",
                "LIVEKIT_INFERENCE_URL": server.url_for("caller"),
                "LIVEKIT_API_KEY": "key",
                "LIVEKIT_API_SECRET": SECRET,
            }
            audio = await build_voice(spec, env).speak(LINE)
            return audio, server.spoken("caller")
        finally:
            await server.stop()

    audio, spoken = run(body)
    assert spoken == [LINE]
    local = run(lambda: EspeakVoice().speak(LINE))
    # The server speaks espeak-ng at 24 kHz; the voice hands it back at 48 kHz, the same length.
    assert len(audio) == pytest.approx(len(local), rel=0.02)


def test_a_providers_padding_is_trimmed_too() -> None:
    # A provider pads its audio with silence; left in, it would count as the agent's latency.
    from aiohttp import web

    tone = (np.sin(np.arange(24000) * 2 * np.pi * 440 / 24000) * 8000).astype("<i2").tobytes()

    async def speech(request: web.Request) -> web.Response:
        return web.Response(body=bytes(24000) + tone + bytes(48000), content_type="audio/pcm")

    async def body() -> bytes:
        app = web.Application()
        app.router.add_post("/v1/audio/speech", speech)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        try:
            port = runner.addresses[0][1]
            env = {"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "OPENAI_API_KEY": "k"}
            return await build_voice("openai:tts-1", env).speak("hello")
        finally:
            await runner.cleanup()

    audio = run(body)
    assert len(audio) / 2 / WIRE_RATE == pytest.approx(1.0, abs=0.01)  # the tone alone
