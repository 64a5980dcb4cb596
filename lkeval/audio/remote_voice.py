"""The caller's voice from a speech provider: OpenAI-compatible HTTP or LiveKit Inference.

Each adapter turns the provider's failures into :class:`SpeechError` with the endpoint and the
status, never the key. LiveKit Inference's JWT is signed here with the standard library (HS256,
the claims ``livekit.agents.inference`` sends), so lk-eval does not depend on which
``livekit-api`` release grew inference grants.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from urllib.parse import urlencode

import aiohttp
import httpx

from lkeval.audio import WIRE_RATE, SpeechError
from lkeval.audio.pcm import resample, trim_silence, wav_to_pcm

OPENAI_PCM_RATE = 24_000
"""``response_format: pcm`` is 24 kHz mono s16le in OpenAI's API."""
INFERENCE_RATE = 24_000
"""The rate livekit's own ``inference.TTS`` asks for (every provider behind the gateway
serves it); resampled to the wire's 48 kHz here."""
TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class OpenAIVoice:
    """``POST {base_url}/audio/speech`` (OpenAI's API or any server speaking it)."""

    base_url: str
    api_key: str | None
    model: str
    voice: str

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIVoice({self.base_url!r}, model={self.model!r}, voice={self.voice!r})"

    async def speak(self, text: str) -> bytes:
        """The line as 48 kHz PCM (asks for raw PCM; a WAV answer is read too)."""
        url = self.base_url.rstrip("/") + "/audio/speech"
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        body = {"model": self.model, "input": text, "voice": self.voice, "response_format": "pcm"}
        try:
            async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as client:
                response = await client.post(url, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise SpeechError(f"voice: POST {url} failed: {type(exc).__name__}") from None
        if response.status_code != 200:
            raise SpeechError(f"voice: POST {url} answered HTTP {response.status_code}")
        if response.headers.get("content-type", "").split(";")[0].strip() in (
            "audio/wav",
            "audio/x-wav",
            "audio/wave",
        ):
            return trim_silence(wav_to_pcm(response.content, WIRE_RATE))
        return trim_silence(resample(response.content, OPENAI_PCM_RATE, WIRE_RATE))


def inference_token(api_key: str, api_secret: str, ttl: int = 600) -> str:
    """A LiveKit access token allowed to perform inference (HS256 JWT)."""

    def part(data: dict[str, object]) -> str:
        raw = json.dumps(data, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    now = int(time.time())
    claims = {"inference": {"perform": True}, "sub": "agent", "iss": api_key}
    header = part({"alg": "HS256", "typ": "JWT"})
    signing = f"{header}.{part({**claims, 'nbf': now, 'exp': now + ttl})}"
    signature = hmac.new(api_secret.encode(), signing.encode(), hashlib.sha256).digest()
    return f"{signing}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


@dataclass(frozen=True)
class InferenceVoice:
    """LiveKit Inference TTS: the ``/tts`` WebSocket, one connection per line."""

    base_url: str
    api_key: str
    api_secret: str
    model: str
    voice: str

    def __repr__(self) -> str:  # never show the key or the secret
        return f"InferenceVoice({self.base_url!r}, model={self.model!r}, voice={self.voice!r})"

    async def speak(self, text: str) -> bytes:
        """The line as 48 kHz PCM (asked at 24 kHz, as livekit's client does)."""
        base = self.base_url.rstrip("/")
        if base.startswith(("http://", "https://")):
            base = base.replace("http", "ws", 1)
        url = f"{base}/tts?{urlencode({'model': self.model})}"
        headers = {"Authorization": f"Bearer {inference_token(self.api_key, self.api_secret)}"}
        create: dict[str, object] = {
            "type": "session.create",
            "sample_rate": str(INFERENCE_RATE),
            "encoding": "pcm_s16le",
            "model": self.model,
            "extra": {},
            **({"voice": self.voice} if self.voice else {}),
        }
        timeout = aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.ws_connect(url, headers=headers) as ws,
            ):
                await ws.send_str(json.dumps(create))
                await ws.send_str(json.dumps({"type": "input_transcript", "transcript": text}))
                await ws.send_str(json.dumps({"type": "session.flush"}))
                audio = await _collect_audio(ws, url)
        except aiohttp.ClientResponseError as exc:
            raise SpeechError(f"voice: {url} answered HTTP {exc.status}") from None
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SpeechError(f"voice: {url} failed: {type(exc).__name__}") from None
        return trim_silence(resample(audio, INFERENCE_RATE, WIRE_RATE))


async def _collect_audio(ws: aiohttp.ClientWebSocketResponse, url: str) -> bytes:
    """The ``output_audio`` chunks up to ``done``."""
    audio = bytearray()
    async for message in ws:
        if message.type != aiohttp.WSMsgType.TEXT:
            break
        data = json.loads(message.data)
        kind = data.get("type")
        if kind == "output_audio":
            audio += base64.b64decode(data.get("audio", ""))
        elif kind == "done":
            return bytes(audio)
        elif kind == "error":
            raise SpeechError(f"voice: {url} returned an error (code {data.get('code', '?')})")
    raise SpeechError(f"voice: {url} closed before the line was spoken")
