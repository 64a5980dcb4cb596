"""``--listen``: the agent's played audio transcribed by lk-eval's own speech-to-text, against
the local speech server's OpenAI ``/audio/transcriptions`` (a real HTTP server on 127.0.0.1)."""

from __future__ import annotations

import pytest
from speech_client import line_audio, run

from lkeval.audio import WIRE_RATE, SpeechError
from lkeval.audio.listen import Listener, build_listener
from lkeval.run.audio_line import Reply
from lkeval.testing.speech_server import SpeechServer

REPLY = "Welcome to Hotel Example, how can I help?"


def test_the_listener_sends_the_reply_and_returns_what_the_stt_heard() -> None:
    async def body() -> tuple[str, str, list[str]]:
        server = SpeechServer()
        await server.start()
        try:
            env = {"LKEVAL_LISTEN_BASE_URL": server.openai_url_for("listen")}
            listener = build_listener("openai:whisper-1", env)
            assert listener is not None
            server.expect_line("listen", REPLY)  # the oracle: what it hears in the speech
            speech = await line_audio(REPLY, WIRE_RATE)
            heard = await listener.transcribe(speech, WIRE_RATE)
            quiet = await listener.transcribe(bytes(WIRE_RATE), WIRE_RATE)  # nothing said
            return heard, quiet, server.pending("listen")
        finally:
            await server.stop()

    heard, quiet, pending = run(body)
    assert heard == REPLY and quiet == "" and pending == []


def test_listen_specs_and_keys_are_checked_and_never_shown() -> None:
    assert build_listener("", {}) is None
    with pytest.raises(SpeechError, match="expected openai:MODEL"):
        build_listener("whisper", {"OPENAI_API_KEY": "k"})
    with pytest.raises(SpeechError, match="needs LKEVAL_LISTEN_API_KEY or OPENAI_API_KEY"):
        build_listener("openai:whisper-1", {})
    listener = build_listener("openai:whisper-1", {"LKEVAL_LISTEN_API_KEY": "sk-secret-1"})
    assert listener == Listener("https://api.openai.com/v1", "sk-secret-1", "whisper-1")
    assert "sk-secret" not in repr(listener)


def test_an_unreachable_listener_is_a_speech_error_naming_the_endpoint() -> None:
    listener = Listener("http://127.0.0.1:9/v1", "sk-secret-2", "whisper-1")
    with pytest.raises(SpeechError, match=r"POST http://127.0.0.1:9/v1/audio/transcriptions") as e:
        run(lambda: listener.transcribe(bytes(960), WIRE_RATE))
    assert "sk-secret" not in str(e.value)


def test_a_reply_the_caller_cut_is_heard_up_to_where_it_stopped() -> None:
    full = Reply(arrived=0.0, starts=1.0, seconds=2.0, pcm=bytearray(2 * WIRE_RATE * 2))
    assert len(full.played_pcm()) == 2 * WIRE_RATE * 2
    cut = Reply(arrived=0.0, starts=1.0, seconds=2.0, cleared=1.5, pcm=full.pcm)
    assert len(cut.played_pcm()) == WIRE_RATE  # half a second of 16-bit samples
