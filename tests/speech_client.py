"""A caller-side client of the local speech server's Inference WebSockets, for the audio tests.

It speaks the protocol by hand (raw aiohttp), so a test sees every message the server sends.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp

from lkeval.audio.espeak import espeak_pcm

T = TypeVar("T")
STT_RATE = 24000


def run(make: Callable[[], Awaitable[T]]) -> T:
    """Run one async test body in a fresh event loop.

    The timeout only keeps a hang from blocking the suite; it is far above any body's time on
    a loaded machine (no timing is asserted).
    """
    return asyncio.run(asyncio.wait_for(make(), timeout=600))  # type: ignore[arg-type]


def ws_url(http_url: str, path: str) -> str:
    return http_url.replace("http", "ws", 1) + path


def silence(seconds: float, rate: int = STT_RATE) -> bytes:
    return bytes(int(seconds * rate) * 2)


async def line_audio(text: str, rate: int = STT_RATE) -> bytes:
    return await espeak_pcm(text, "en-us", rate)


async def stt_exchange(
    url: str, audio: bytes, *, finalize: bool = False, rate: int = STT_RATE
) -> list[dict[str, Any]]:
    """Stream ``audio`` (50 ms chunks) to ``url``/stt, then close; every server message."""
    received: list[dict[str, Any]] = []
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(ws_url(url, "/stt?model=deepgram/nova-3")) as ws,
    ):
        create = {"type": "session.create", "settings": {"sample_rate": str(rate)}}
        await ws.send_str(json.dumps({**create, "model": "deepgram/nova-3"}))
        step = rate // 20 * 2
        for i in range(0, len(audio), step):
            chunk = base64.b64encode(audio[i : i + step]).decode()
            await ws.send_str(json.dumps({"type": "input_audio", "audio": chunk}))
        await ws.send_str(json.dumps({"type": "session.finalize" if finalize else "noop"}))
        await ws.send_str(json.dumps({"type": "session.close"}))
        async for message in ws:
            data = json.loads(message.data)
            received.append(data)
            if data["type"] == "session.closed":
                break
    return received


async def tts_exchange(url: str, generations: list[list[str]], rate: int = 24000) -> list[bytes]:
    """Speak each generation's sentences over one ``/tts`` socket; the audio of each."""
    audio: list[bytes] = []
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(ws_url(url, "/tts?model=cartesia/sonic-3")) as ws,
    ):
        create = {"type": "session.create", "sample_rate": str(rate), "encoding": "pcm_s16le"}
        await ws.send_str(json.dumps(create))
        for sentences in generations:
            for sentence in sentences:
                message = {"type": "input_transcript", "transcript": sentence + " "}
                await ws.send_str(json.dumps(message))
            await ws.send_str(json.dumps({"type": "session.flush"}))
            pcm = bytearray()
            async for message in ws:
                data = json.loads(message.data)
                if data["type"] == "done":
                    break
                assert data["type"] == "output_audio", data
                pcm += base64.b64decode(data["audio"])
            audio.append(bytes(pcm))
    return audio
