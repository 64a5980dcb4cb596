"""The local speech server, driven by a raw Inference-protocol client and by plain HTTP.

Every test starts a real :class:`SpeechServer` on 127.0.0.1 and talks to it over sockets.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import numpy as np
import pytest
from aiohttp import web
from speech_client import line_audio, run, silence, stt_exchange, tts_exchange, ws_url

from lkeval.audio.pcm import rms
from lkeval.testing.speech_server import SpeechServer

LINE = "I would like to book a room for two nights."


async def with_server(body: Callable[[SpeechServer], Awaitable[Any]], **kwargs: Any) -> Any:
    server = SpeechServer(**kwargs)
    await server.start()
    try:
        return await body(server)
    finally:
        await server.stop()


def kinds(messages: list[dict[str, Any]]) -> list[str]:
    return [m["type"] for m in messages]


def test_the_oracle_hears_the_announced_line_once_the_caller_stops() -> None:
    async def body(server: SpeechServer) -> tuple[list[dict[str, Any]], float, list[str]]:
        server.expect_line("k1", LINE)
        speech = await line_audio(LINE)
        audio = silence(0.5) + speech + silence(1.0)
        return (
            await stt_exchange(server.url_for("k1"), audio),
            len(speech) / 48000,
            server.heard("k1"),
        )

    messages, spoken_for, heard = run(lambda: with_server(body))
    assert kinds(messages) == [
        "session.created",
        "start_of_speech",
        "interim_transcript",
        "final_transcript",
        "session.closed",
    ]
    final = messages[3]
    assert final["transcript"] == LINE
    assert [w["word"] for w in final["words"]] == LINE.split()
    # The utterance is placed where the speech is in the stream (0.5 s of silence first).
    assert final["start"] == pytest.approx(0.5, abs=0.05)
    assert final["duration"] == pytest.approx(spoken_for, abs=0.1)
    assert messages[2]["transcript"] == LINE
    assert heard == [LINE]


def test_attempts_are_told_apart_and_lines_come_in_order() -> None:
    async def body(server: SpeechServer) -> tuple[list[str], list[str]]:
        server.expect_line("a", "first line for a")
        server.expect_line("a", "second line for a")
        server.expect_line("b", "the only line for b")
        speech = await line_audio("hello there")
        audio = speech + silence(0.8) + speech + silence(0.8)
        a = await stt_exchange(server.url_for("a"), audio)
        b = await stt_exchange(server.url_for("b"), speech + silence(0.8))
        finals = lambda ms: [m["transcript"] for m in ms if m["type"] == "final_transcript"]  # noqa: E731
        assert server.heard("a") == finals(a)
        return finals(a), finals(b)

    a, b = run(lambda: with_server(body))
    assert a == ["first line for a", "second line for a"]
    assert b == ["the only line for b"]


def test_a_pause_inside_a_line_does_not_end_it_but_trailing_silence_does() -> None:
    # espeak-ng pauses ~0.35 s at a full stop; a line of two sentences is one utterance.
    async def body(server: SpeechServer) -> list[dict[str, Any]]:
        server.expect_line("k", "Hello. I need a room.")
        audio = await line_audio("Hello. I need a room.")
        return await stt_exchange(server.url_for("k"), audio + silence(0.6))

    messages = run(lambda: with_server(body))
    assert kinds(messages).count("start_of_speech") == 1
    assert [m["transcript"] for m in messages if m["type"] == "final_transcript"] == [
        "Hello. I need a room."
    ]


def test_noise_at_15_db_does_not_start_or_split_utterances() -> None:
    async def body(server: SpeechServer) -> list[dict[str, Any]]:
        server.expect_line("k", LINE)
        speech = await line_audio(LINE)
        audio = silence(1.0) + speech + silence(1.0)
        samples = np.frombuffer(audio, dtype="<i2").astype(np.float64)
        noise = np.random.default_rng(7).normal(0, rms(speech) / 10 ** (15 / 20), samples.size)
        noisy = np.clip(samples + noise, -32768, 32767).astype("<i2").tobytes()
        return await stt_exchange(server.url_for("k"), noisy)

    messages = run(lambda: with_server(body))
    finals = [m for m in messages if m["type"] == "final_transcript"]
    assert [m["transcript"] for m in finals] == [LINE]
    assert finals[0]["start"] == pytest.approx(1.0, abs=0.1)


def test_finalize_ends_the_utterance_at_once() -> None:
    # The agent's VAD saw the end of speech: the transcript must not wait for the endpointer.
    async def body(server: SpeechServer) -> list[dict[str, Any]]:
        server.expect_line("k", LINE)
        audio = await line_audio(LINE)
        return await stt_exchange(server.url_for("k"), audio + silence(0.2), finalize=True)

    messages = run(lambda: with_server(body))
    assert kinds(messages)[-3:] == ["final_transcript", "session.finalized", "session.closed"]
    assert messages[-3]["transcript"] == LINE


def test_speech_nobody_announced_gets_an_empty_final() -> None:
    async def body(server: SpeechServer) -> tuple[list[dict[str, Any]], list[str]]:
        audio = await line_audio("an unexpected cough")
        return await stt_exchange(server.url_for("k"), audio + silence(0.8)), server.heard("k")

    messages, heard = run(lambda: with_server(body))
    finals = [m for m in messages if m["type"] == "final_transcript"]
    assert [m["transcript"] for m in finals] == [""]
    assert heard == []


def test_tts_speaks_each_generation_on_one_pooled_socket() -> None:
    async def body(server: SpeechServer) -> tuple[list[bytes], list[str]]:
        url = server.url_for("k")
        audio = await tts_exchange(url, [["Welcome to the hotel.", "How can I help?"], ["Bye."]])
        return audio, server.spoken("k")

    (first, second), spoken = run(lambda: with_server(body))
    assert 1.0 < len(first) / 48000 < 6.0  # 24 kHz s16le
    assert 0.1 < len(second) / 48000 < len(first) / 48000
    assert rms(first) > 500
    assert spoken == ["Welcome to the hotel.", "How can I help?", "Bye."]


async def _echo_upstream() -> tuple[web.AppRunner, str, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []

    async def record(request: web.Request) -> web.StreamResponse:
        seen.append(
            {
                "path": request.path,
                "query": dict(request.query),
                "headers": dict(request.headers),
                "body": await request.text(),
            }
        )
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for part in (b"data: one\n\n", b"data: [DONE]\n\n"):
            await response.write(part)
        return response

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}/v1", seen


def test_what_is_not_speech_goes_upstream_with_the_callers_own_headers() -> None:
    async def body() -> tuple[int, str, list[dict[str, Any]], int]:
        runner, upstream, seen = await _echo_upstream()
        server = SpeechServer(upstream)
        await server.start()
        try:
            async with aiohttp.ClientSession() as session:
                url = server.url_for("k") + "/chat/completions?x=1"
                headers = {"Authorization": "Bearer agent-secret", "X-Custom": "kept"}
                async with session.post(url, data='{"model":"m"}', headers=headers) as r:
                    status, text = r.status, await r.text()
                async with session.get(server.openai_url_for("k") + "/models") as r2:
                    unconfigured = r2.status
            return status, text, seen, unconfigured
        finally:
            await server.stop()
            await runner.cleanup()

    status, text, seen, unconfigured = run(body)
    assert status == 200
    assert text == "data: one\n\ndata: [DONE]\n\n"
    assert seen[0]["path"] == "/v1/chat/completions"
    assert seen[0]["query"] == {"x": "1"}
    assert seen[0]["headers"]["Authorization"] == "Bearer agent-secret"
    assert seen[0]["headers"]["X-Custom"] == "kept"
    assert seen[0]["body"] == '{"model":"m"}'
    assert unconfigured == 404  # no openai upstream configured: nothing is guessed


def test_eot_is_refused_so_the_turn_detector_runs_locally() -> None:
    async def body(server: SpeechServer) -> int:
        async with aiohttp.ClientSession() as session:
            try:
                async with session.ws_connect(ws_url(server.url_for("k"), "/eot")):
                    return 101
            except aiohttp.WSServerHandshakeError as exc:
                return exc.status

    assert run(lambda: with_server(body)) == 404


def test_the_oracle_can_be_driven_over_http() -> None:
    async def body(server: SpeechServer) -> tuple[dict[str, Any], list[str]]:
        async with aiohttp.ClientSession() as session:
            await session.post(server.base_url + "/_control/k/expect", json={"text": LINE})
            audio = await line_audio(LINE)
            await stt_exchange(server.url_for("k"), audio + silence(0.8))
            async with session.get(server.base_url + "/_control/k/heard") as r:
                return await r.json(), server.heard("k")

    reply, heard = run(lambda: with_server(body))
    assert reply == {"heard": [LINE], "spoken": []}
    assert heard == [LINE]


def test_bad_attempt_keys_are_refused() -> None:
    server = SpeechServer()
    with pytest.raises(ValueError, match="attempt key"):
        server.url_for("../etc")


def test_the_command_line_prints_its_port_and_serves() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "lkeval.testing.speech_server"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline().split()
        assert first[0] == "PORT"

        async def body() -> list[bytes]:
            return await tts_exchange(f"http://127.0.0.1:{first[1]}", [["Hello."]])

        (audio,) = run(body)
        assert len(audio) > 4800
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 130


def test_openai_style_speech_and_transcription() -> None:
    async def body(server: SpeechServer) -> tuple[int, str, bytes, dict[str, Any]]:
        url = server.openai_url_for("k")
        server.expect_line("k", LINE)
        async with aiohttp.ClientSession() as session:
            async with session.post(url + "/audio/speech", json={"input": LINE}) as r:
                wav_status, wav_type, wav = r.status, r.content_type, await r.read()
            form = aiohttp.FormData()
            form.add_field("file", wav, filename="a.wav", content_type="audio/wav")
            form.add_field("model", "whisper-1")
            async with session.post(url + "/audio/transcriptions", data=form) as r:
                return wav_status, wav_type, wav, await r.json()

    status, content_type, wav, transcript = run(lambda: with_server(body))
    assert (status, content_type) == (200, "audio/wav")
    assert wav[:4] == b"RIFF" and len(wav) > 48000
    assert transcript == {"text": LINE}
    assert json.dumps(transcript)


def test_a_tts_failure_reaches_the_client_as_an_error() -> None:
    # An espeak-ng voice that does not exist: the client must get `error`, not wait forever.
    async def body(server: SpeechServer) -> list[str]:
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(ws_url(server.url_for("k"), "/tts")) as ws,
        ):
            await ws.send_str(json.dumps({"type": "session.create", "sample_rate": "24000"}))
            await ws.send_str(json.dumps({"type": "input_transcript", "transcript": "Hello."}))
            await ws.send_str(json.dumps({"type": "session.flush"}))
            return [json.loads((await ws.receive(timeout=20)).data)["type"] for _ in range(2)]

    # The error, then the generation's end: the socket stays usable for the next one.
    assert run(lambda: with_server(body, voice="zzqq")) == ["error", "done"]


def test_pocketsphinx_recognizes_speech_one_utterance_after_another() -> None:
    pytest.importorskip("pocketsphinx", reason="the optional extra: pip install 'lk-eval[speech]'")

    async def body(server: SpeechServer) -> list[dict[str, Any]]:
        audio = await line_audio(LINE)
        stream = silence(0.3) + audio + silence(0.8) + audio + silence(0.8)
        return await stt_exchange(server.url_for("k"), stream)

    messages = run(lambda: with_server(body, stt="pocketsphinx"))
    finals = [m["transcript"] for m in messages if m["type"] == "final_transcript"]
    assert len(finals) == 2
    # It garbles synthetic speech ("... the look on google or two on"), but not all of it; one
    # decoder per socket (its noise normalization adapts, so the words may differ a little).
    assert all({"i", "would", "like"} <= set(f.split()) for f in finals)


@pytest.mark.parametrize("spec", ["loss=10%,burst=100ms", "codec=mulaw,noise=20dB", "codec=opus"])
def test_impaired_caller_audio_is_still_one_utterance_per_line(spec: str) -> None:
    from lkeval.audio import WIRE_RATE
    from lkeval.audio.impair import Impairer, parse_impairments
    from lkeval.audio.pcm import resample

    async def body(server: SpeechServer) -> list[dict[str, Any]]:
        server.expect_line("k", LINE)
        server.expect_line("k", "second")
        speech = await line_audio(LINE, WIRE_RATE)
        impairer = Impairer(parse_impairments(spec + ",seed=3"))
        impairer.calibrate(speech)
        heard = impairer.process_line(bytes(WIRE_RATE) + speech + bytes(WIRE_RATE * 2))
        return await stt_exchange(server.url_for("k"), resample(heard, WIRE_RATE, 24000))

    messages = run(lambda: with_server(body))
    assert [m["transcript"] for m in messages if m["type"] == "final_transcript"] == [LINE]


def test_a_line_the_agent_never_heard_can_be_dropped_so_the_next_is_not_shifted() -> None:
    async def body(server: SpeechServer) -> tuple[list[str], list[str], list[str]]:
        server.expect_line("k", "lost on the way")  # its audio never reaches the STT
        before = server.pending("k")
        dropped = server.clear_expected("k")
        server.expect_line("k", LINE)
        audio = await line_audio(LINE)
        await stt_exchange(server.url_for("k"), audio + silence(0.8))
        return before, dropped, server.heard("k")

    before, dropped, heard = run(lambda: with_server(body))
    assert before == dropped == ["lost on the way"]
    assert heard == [LINE]


def test_an_unreachable_upstream_is_a_502_naming_no_header() -> None:
    async def body(server: SpeechServer) -> tuple[int, str]:
        async with aiohttp.ClientSession() as session:
            headers = {"Authorization": "Bearer sk-never-shown"}
            url = server.url_for("k") + "/chat/completions"
            async with session.post(url, data="{}", headers=headers) as r:
                return r.status, await r.text()

    status, text = run(lambda: with_server(body, upstream="http://127.0.0.1:9/v1"))
    assert status == 502
    assert "upstream unreachable" in text and "sk-never-shown" not in text
