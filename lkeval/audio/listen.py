"""``--listen``: what a caller hears of the agent, transcribed by a speech-to-text of lk-eval's.

The agent's own STT says what the *agent* heard; nothing in a call says what the *caller*
heard: the agent's reply as its TTS spoke it, cut where the caller interrupted it. With
``--listen openai:MODEL`` each audio turn's played reply (the speaker's audio up to where it
stopped playing) is sent to an OpenAI-compatible ``POST /audio/transcriptions`` and the text is
recorded as the turn's ``agent_heard``: a TTS that garbles a number, or a reply cut before its
point, shows there. The call is transcribed once it is over, so the transcriptions never delay
a caller's line or a barge-in.

Configured like ``--voice``'s provider voice: ``LKEVAL_LISTEN_BASE_URL`` (else
``OPENAI_BASE_URL``, else OpenAI's API) and ``LKEVAL_LISTEN_API_KEY`` (else ``OPENAI_API_KEY``);
a failure is a :class:`SpeechError` naming the endpoint and the status, never the key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from lkeval.audio import SpeechError
from lkeval.audio.pcm import pcm_to_wav, resample

LISTEN_RATE = 16_000
"""What is sent: 16 kHz mono WAV, all of a voice and a third of the wire's bytes."""
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
TIMEOUT_SECONDS = 60.0
_SPEC = re.compile(r"^openai:([A-Za-z0-9_.\-/]{1,100})$")


@dataclass(frozen=True)
class Listener:
    """``POST {base_url}/audio/transcriptions`` (OpenAI's API or any server speaking it)."""

    base_url: str
    api_key: str | None
    model: str

    def __repr__(self) -> str:  # never show the key
        return f"Listener({self.base_url!r}, model={self.model!r})"

    async def transcribe(self, pcm: bytes, rate: int) -> str:
        """What the speech-to-text hears in ``pcm`` (mono s16le at ``rate``)."""
        url = self.base_url.rstrip("/") + "/audio/transcriptions"
        wav = pcm_to_wav(resample(pcm, rate, LISTEN_RATE), LISTEN_RATE)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        files = {"file": ("reply.wav", wav, "audio/wav")}
        data = {"model": self.model, "response_format": "json"}
        try:
            async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as client:
                response = await client.post(url, files=files, data=data, headers=headers)
        except httpx.HTTPError as exc:
            raise SpeechError(f"listen: POST {url} failed: {type(exc).__name__}") from None
        if response.status_code != 200:
            raise SpeechError(f"listen: POST {url} answered HTTP {response.status_code}")
        try:
            return str(response.json().get("text", "")).strip()
        except (ValueError, AttributeError):
            raise SpeechError(f"listen: POST {url} answered no JSON transcript") from None


def build_listener(spec: str, env: Mapping[str, str]) -> Listener | None:
    """The listener for ``--listen SPEC`` ("" for none); :class:`SpeechError` (exit 2) for a
    malformed spec or a missing key, naming the flag or the variable, never a key's value."""
    if not spec:
        return None
    match = _SPEC.match(spec)
    if match is None:
        raise SpeechError(f"--listen {spec!r}: expected openai:MODEL (e.g. openai:whisper-1)")
    base = env.get("LKEVAL_LISTEN_BASE_URL") or env.get("OPENAI_BASE_URL") or None
    key = env.get("LKEVAL_LISTEN_API_KEY") or env.get("OPENAI_API_KEY") or None
    if key is None and base is None:
        raise SpeechError(f"--listen {spec!r} needs LKEVAL_LISTEN_API_KEY or OPENAI_API_KEY")
    return Listener(base or OPENAI_DEFAULT_URL, key, match.group(1))


__all__ = ["Listener", "build_listener"]
