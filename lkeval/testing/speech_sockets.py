"""LiveKit Inference's speech WebSockets, served locally: ``/stt`` and ``/tts``.

The message shapes are those ``livekit.agents.inference.stt``/``tts`` (1.6.6–1.8) send and read:

* STT. Client: ``session.create {settings: {sample_rate, encoding, language}}`` (the rate is a
  string), ``input_audio {audio: base64}`` (50 ms chunks), ``session.finalize`` (its VAD saw the
  end of speech), ``session.close``. Server: ``session.created``, ``start_of_speech``,
  ``interim_transcript``/``final_transcript {transcript, start, duration, confidence, words,
  language, request_id}``, ``session.finalized``, ``session.closed``.
* TTS. Client: ``session.create {sample_rate, encoding, model, voice}``, then per generation
  ``input_transcript {transcript}`` per sentence and ``session.flush``. Server: ``output_audio
  {audio: base64, session_id}`` and ``done``. The client pools connections, so one socket
  carries many generations, each ended by its own ``done``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from aiohttp import WSMsgType, web

from lkeval.audio import SpeechError
from lkeval.audio.espeak import espeak_pcm
from lkeval.testing.speech_stt import (
    INTERIM_AFTER,
    AttemptSpeech,
    Endpointer,
    Recognizer,
    is_finite_rate,
    words_of,
)

PREROLL_SECONDS = 0.3
TTS_CHUNK_SECONDS = 0.1


class SttSession:
    """One ``/stt`` socket: endpointing, recognition, transcripts back."""

    def __init__(
        self, ws: web.WebSocketResponse, speech: AttemptSpeech, make: Callable[[], Recognizer]
    ) -> None:
        self._ws, self._speech, self._make = ws, speech, make
        self._id = uuid.uuid4().hex[:12]
        self._rate = 16000
        self._endpointer = Endpointer(self._rate)
        self._recognizer: Recognizer | None = None  # the utterance's, while one is open
        self._kept: Recognizer | None = None  # made once per socket (pocketsphinx loads 38 MB)
        self._preroll: deque[bytes] = deque()
        self._interim_sent = False

    async def serve(self) -> None:
        """Answer the client's messages until it closes."""
        async for message in self._ws:
            if message.type != WSMsgType.TEXT:
                continue
            data = _json(message.data)
            kind = data.get("type")
            if kind == "session.create":
                settings = data.get("settings") or {}
                self._rate = is_finite_rate(settings.get("sample_rate"), 16000)
                self._endpointer = Endpointer(self._rate)
                await self._send({"type": "session.created", "session_id": self._id})
            elif kind == "input_audio":
                await self._audio(_b64(data.get("audio")))
            elif kind == "session.finalize":
                if self._endpointer.speaking:
                    await self._final(self._endpointer.close())
                await self._send({"type": "session.finalized", "session_id": self._id})
            elif kind == "session.close":
                await self._send({"type": "session.closed", "session_id": self._id})
                break

    async def _audio(self, pcm: bytes) -> None:
        was_speaking = self._endpointer.speaking
        for kind, at in self._endpointer.push(pcm):
            if kind == "start":
                await self._start()
            else:
                await self._final(at)
        if self._recognizer is not None and (was_speaking or self._endpointer.speaking):
            await asyncio.to_thread(self._recognizer.feed, pcm, self._rate)
        elif not self._endpointer.speaking:
            self._preroll.append(pcm)
            while sum(map(len, self._preroll)) > PREROLL_SECONDS * self._rate * 2:
                self._preroll.popleft()
        await self._maybe_interim()

    async def _start(self) -> None:
        if self._kept is None:
            self._kept = await asyncio.to_thread(self._make)
        self._recognizer, self._interim_sent = self._kept, False
        preroll = b"".join(self._preroll)
        self._preroll.clear()
        if preroll:
            await asyncio.to_thread(self._recognizer.feed, preroll, self._rate)
        await self._send({"type": "start_of_speech", "session_id": self._id})

    async def _maybe_interim(self) -> None:
        endpointer, recognizer = self._endpointer, self._recognizer
        if not endpointer.speaking or self._interim_sent or recognizer is None:
            return
        if endpointer.position - endpointer.started_at < INTERIM_AFTER:
            return
        self._interim_sent = True
        if (text := recognizer.preview()) is not None:
            await self._send(self._transcript("interim_transcript", text, endpointer.position))

    async def _final(self, ended_at: float) -> None:
        recognizer, self._recognizer = self._recognizer, None
        text = await asyncio.to_thread(recognizer.finish) if recognizer is not None else ""
        if text:
            self._speech.heard.append(text)
        await self._send(self._transcript("final_transcript", text, ended_at))

    def _transcript(self, kind: str, text: str, ended_at: float) -> dict[str, Any]:
        start = self._endpointer.started_at
        duration = max(0.0, ended_at - start)
        return {
            "type": kind,
            "session_id": self._id,
            "request_id": self._id,
            "transcript": text,
            "start": start,
            "duration": duration,
            "confidence": 1.0,
            "language": "en",
            "words": words_of(text, start, duration),
        }

    async def _send(self, data: dict[str, Any]) -> None:
        if not self._ws.closed:
            await self._ws.send_str(json.dumps(data))


async def serve_tts(ws: web.WebSocketResponse, speech: AttemptSpeech, voice: str) -> None:
    """One ``/tts`` socket: each sentence spoken by espeak-ng as it arrives, ``done`` per flush.

    If espeak-ng fails the client gets an ``error`` message at once (as from the real gateway;
    the agent's TTS raises on it) instead of waiting for audio that never comes.
    """
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    rate = 24000

    async def speak_in_order() -> None:
        generation = uuid.uuid4().hex[:12]
        while True:
            text = await queue.get()
            if text is None:
                await ws.send_str(json.dumps({"type": "done", "session_id": generation}))
                generation = uuid.uuid4().hex[:12]
                continue
            speech.spoken.append(text.strip())
            try:
                pcm = await espeak_pcm(text, voice, rate)
            except SpeechError:
                await ws.send_str(json.dumps({"type": "error", "code": 500}))
                continue
            step = int(rate * TTS_CHUNK_SECONDS) * 2
            for i in range(0, len(pcm), step):
                chunk = base64.b64encode(pcm[i : i + step]).decode()
                message = {"type": "output_audio", "session_id": generation, "audio": chunk}
                await ws.send_str(json.dumps(message))

    speaker = asyncio.create_task(speak_in_order())
    try:
        async for message in ws:
            if message.type != WSMsgType.TEXT:
                continue
            data = _json(message.data)
            kind = data.get("type")
            if kind == "session.create":
                rate = is_finite_rate(data.get("sample_rate"), 24000)
            elif kind == "input_transcript" and str(data.get("transcript", "")).strip():
                queue.put_nowait(str(data["transcript"]))
            elif kind == "session.flush":
                queue.put_nowait(None)
            elif kind == "session.close":
                break
    finally:
        speaker.cancel()


def _json(raw: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _b64(value: object) -> bytes:
    try:
        return base64.b64decode(str(value or ""), validate=True)
    except (binascii.Error, ValueError):
        return b""
