"""The simulated caller's voice: a line of text in, 48 kHz mono PCM out.

Three engines behind one small protocol, picked by a spec string (``--voice``):

* ``espeak[:VOICE]`` (the default, ``espeak:en-us``): espeak-ng on this machine, no network,
  no key; robotic but intelligible, and exactly the same audio every run.
* ``openai:MODEL[:VOICE]``: an OpenAI-compatible ``POST /audio/speech`` at
  ``LKEVAL_VOICE_BASE_URL`` or ``OPENAI_BASE_URL`` (default api.openai.com), key from
  ``LKEVAL_VOICE_API_KEY`` or ``OPENAI_API_KEY``.
* ``inference:PROVIDER/MODEL[:VOICE]``: LiveKit Inference TTS over its WebSocket at
  ``LIVEKIT_INFERENCE_URL`` (default LiveKit Cloud's gateway), a JWT signed with
  ``LIVEKIT_INFERENCE_API_KEY``/``LIVEKIT_API_KEY`` and the matching secret.

Keys come from the environment only, like the caller's and the judge's, and are never part of an
error message. Every voice is wrapped in a per-run cache keyed by (voice, text): a scripted line
spoken in twenty scenarios is synthesized once, and a replayed call hears the same bytes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from lkeval.audio import WIRE_RATE, SpeechError
from lkeval.audio.espeak import espeak_pcm
from lkeval.audio.remote_voice import InferenceVoice, OpenAIVoice

DEFAULT_VOICE = "espeak:en-us"
LIVEKIT_INFERENCE_DEFAULT_URL = "https://agent-gateway.livekit.cloud/v1"
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
_NAME = re.compile(r"^[A-Za-z0-9_.+/-]+$")


class CallerVoice(Protocol):
    """Speaks one line: 48 kHz mono s16le PCM, the engine's silence at both ends trimmed."""

    async def speak(self, text: str) -> bytes: ...


@dataclass
class EspeakVoice:
    """espeak-ng on this machine (the Action's image ships it)."""

    voice: str = "en-us"
    words_per_minute: int = 165

    async def speak(self, text: str) -> bytes:
        """The line in espeak-ng's ``voice``."""
        return await espeak_pcm(text, self.voice, WIRE_RATE, self.words_per_minute)


@dataclass
class CachedVoice:
    """A voice that synthesizes each distinct line once per run.

    Concurrent requests for the same line share one synthesis (two scenarios starting with the
    same scripted greeting do not both pay for it); a failed synthesis is not cached.
    """

    inner: CallerVoice
    name: str
    _lines: dict[tuple[str, str], asyncio.Future[bytes]] = field(default_factory=dict)

    async def speak(self, text: str) -> bytes:
        """The cached audio of ``text``, synthesizing it on first use."""
        key = (self.name, text)
        pending = self._lines.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self.inner.speak(text))
            self._lines[key] = pending
        try:
            return await asyncio.shield(pending)
        except Exception:
            if self._lines.get(key) is pending:
                del self._lines[key]
            raise

    @property
    def cached_lines(self) -> int:
        """How many distinct lines are held (for the run's statistics)."""
        return sum(1 for f in self._lines.values() if f.done() and not f.exception())


def _env(env: Mapping[str, str], *names: str) -> str | None:
    """The first of ``names`` set to a non-blank value."""
    for name in names:
        if value := env.get(name, "").strip():
            return value
    return None


def _split(spec: str) -> tuple[str, str, str]:
    """(engine, model, voice) of ``engine[:model][:voice]``-shaped specs, checked for shape."""
    engine, _, rest = spec.strip().partition(":")
    if engine == "espeak":
        return engine, "", rest or "en-us"
    if engine in ("openai", "inference"):
        model, _, voice = rest.partition(":")
        if not model:
            raise SpeechError(f"--voice {spec!r}: {engine} needs a model ({engine}:MODEL[:VOICE])")
        return engine, model, voice
    raise SpeechError(
        f"--voice {spec!r}: unknown engine {engine!r} (espeak[:VOICE], openai:MODEL[:VOICE], "
        "inference:PROVIDER/MODEL[:VOICE])"
    )


def build_voice(spec: str, env: Mapping[str, str]) -> CachedVoice:
    """The caller's voice for ``spec`` (see the module docstring), cached per run.

    Raises :class:`SpeechError` (exit 2) for a malformed spec or a missing key, before any agent
    boots; the message names the flag or the variable, never a key's value.
    """
    engine, model, voice = _split(spec or DEFAULT_VOICE)
    for part in (model, voice):
        if part and not _NAME.match(part):
            raise SpeechError(f"--voice {spec!r}: {part!r} is not a model or voice name")
    inner: CallerVoice
    if engine == "espeak":
        inner = EspeakVoice(voice)
    elif engine == "openai":
        base = _env(env, "LKEVAL_VOICE_BASE_URL", "OPENAI_BASE_URL")
        key = _env(env, "LKEVAL_VOICE_API_KEY", "OPENAI_API_KEY")
        if key is None and base is None:
            raise SpeechError(f"--voice {spec!r} needs LKEVAL_VOICE_API_KEY or OPENAI_API_KEY")
        inner = OpenAIVoice(base or OPENAI_DEFAULT_URL, key, model, voice or "alloy")
    else:
        key = _env(env, "LIVEKIT_INFERENCE_API_KEY", "LIVEKIT_API_KEY")
        secret = _env(env, "LIVEKIT_INFERENCE_API_SECRET", "LIVEKIT_API_SECRET")
        if key is None or secret is None:
            raise SpeechError(f"--voice {spec!r} needs LIVEKIT_API_KEY and LIVEKIT_API_SECRET")
        url = _env(env, "LIVEKIT_INFERENCE_URL") or LIVEKIT_INFERENCE_DEFAULT_URL
        inner = InferenceVoice(url, key, secret, model, voice)
    return CachedVoice(inner, name=f"{engine}:{model}:{voice}")


__all__ = ["DEFAULT_VOICE", "CachedVoice", "CallerVoice", "EspeakVoice", "build_voice"]
