"""The run's speech in audio mode: the caller's voice, and the speech models the agent reaches.

``--speech agent`` (the default) leaves the agent's STT and TTS as it configured them: the
provider keys it is given are used, and recognition is tested for real. ``--speech local``
starts lk-eval's local speech server for the run (``lkeval/testing/speech_server.py``), a
LiveKit-Inference-compatible ``/stt`` and ``/tts`` (and the OpenAI ``/audio`` routes) with an
*oracle* STT: lk-eval tells it each line just before the microphone speaks it, so the agent
hears exactly what the caller said, with stable latency, and no network is needed. What that
does not test (recognition) every report says, from :attr:`RunSpeech.conditions`.

Each attempt gets its own URL prefix on the server (its oracle lines are its own), set in its
agent's environment as ``LIVEKIT_INFERENCE_URL`` and, for the openai plugin, ``OPENAI_BASE_URL``;
the agent's LLM calls there are forwarded unchanged to where they would have gone
(the agent's own ``LIVEKIT_INFERENCE_URL`` and ``OPENAI_BASE_URL``, else their defaults).

The local server is a test double the user asks for by name, so this module (alone in the
product) imports from ``lkeval/testing/``; tests/project/test_architecture.py allows it here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from lkeval.audio.impair import Impairer, derive_seed, parse_impairments
from lkeval.host.tape import ALIASES_ENV
from lkeval.run.audio_turns import AudioSettings, BeforeLine

LOCAL_KEY = "lkeval-local-speech"  # the local server checks no key; LiveKit's SDK wants one
INFERENCE_URL = "LIVEKIT_INFERENCE_URL"
OPENAI_URL = "OPENAI_BASE_URL"
#: Where LiveKit Inference and OpenAI live when an agent names no URL (their SDKs' defaults).
DEFAULT_INFERENCE_URL = "https://agent-gateway.livekit.cloud/v1"
DEFAULT_OPENAI_URL = "https://api.openai.com/v1"
#: The local server's recognizers (``lkeval.testing.speech_stt.SttEngine``).
Stt = Literal["oracle", "pocketsphinx"]


def server_key(attempt_key: str) -> str:
    """An attempt's key as a URL path segment (``hotel/books#2`` -> ``hotel_books_2-1a2b3c4d``):
    readable in the server's log, unique by its digest."""
    digest = hashlib.sha256(attempt_key.encode("utf-8")).hexdigest()[:8]
    return f"{re.sub(r'[^A-Za-z0-9_.-]', '_', attempt_key)[:100]}-{digest}"


class RunSpeech:
    """The :class:`~lkeval.run.collaborators.AudioRig` of one run; ``start`` it in the run's
    event loop before the first audio attempt, ``stop`` it after the last."""

    def __init__(
        self, speech: str, voice: str, env: Mapping[str, str], impair: str = "", listen: str = ""
    ) -> None:
        self.speech = speech
        self.voice_spec = voice
        self.env = dict(env)
        self.impairments = parse_impairments(impair)
        self.listen_spec = listen
        self._server: Any = None
        self._voice: Any = None
        self._listener: Any = None  # lkeval.audio.listen.Listener with --listen
        self.conditions = self._describe()

    def _describe(self) -> str:
        voice = f"caller voice {self.voice_spec}"
        if self.listen_spec:
            voice += f"; the agent's audio transcribed by {self.listen_spec} (--listen)"
        if self.impairments.active:
            voice += f" through {self.impairments.describe()}"
        if self.local and self.stt == "pocketsphinx":
            return (
                f"{voice}; agent's STT/TTS from lk-eval's local speech server "
                "(pocketsphinx STT: a weak recognizer of synthetic speech; espeak TTS)"
            )
        if self.local:
            return (
                f"{voice}; agent's STT/TTS from lk-eval's local speech server "
                "(oracle STT: recognition not tested; espeak TTS)"
            )
        return f"{voice}; agent's own speech models"

    @property
    def local(self) -> bool:
        return self.speech.split(":")[0] == "local"

    @property
    def stt(self) -> Stt:
        """The local server's recognizer: ``local:pocketsphinx`` hears the audio, ``local``
        is the oracle told each line."""
        return "pocketsphinx" if self.speech == "local:pocketsphinx" else "oracle"

    async def start(self) -> None:
        from lkeval.audio.listen import build_listener  # httpx: not on the CLI's import path
        from lkeval.audio.voice import build_voice

        self._voice = build_voice(self.voice_spec, self.env)
        self._listener = build_listener(self.listen_spec, self.env)
        if self.local:
            from lkeval.testing.speech_server import SpeechServer

            # the agent's LLM calls are forwarded to where they would have gone
            self._server = SpeechServer(
                upstream=self._upstream(INFERENCE_URL),
                openai_upstream=self._upstream(OPENAI_URL),
                stt=self.stt,
            )
            await self._server.start()

    def _upstream(self, name: str) -> str:
        """Where the agent's ``name`` URL would point without the server."""
        default = DEFAULT_INFERENCE_URL if name == INFERENCE_URL else DEFAULT_OPENAI_URL
        return self.env.get(name) or default

    async def stop(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            await server.stop()

    def agent_env(self, attempt_key: str) -> dict[str, str]:
        if self._server is None:
            return {}
        key = server_key(attempt_key)
        inference, openai = self._server.url_for(key), self._server.openai_url_for(key)
        # with --cassettes, the agent's calls are taped as the server forwards them: on the
        # upstream's URL, not this run's port and attempt prefix (else no replay could match)
        aliases = {inference: self._upstream(INFERENCE_URL), openai: self._upstream(OPENAI_URL)}
        return {
            ALIASES_ENV: json.dumps(aliases),
            INFERENCE_URL: str(inference),
            "LIVEKIT_API_KEY": self.env.get("LIVEKIT_API_KEY") or LOCAL_KEY,
            "LIVEKIT_API_SECRET": self.env.get("LIVEKIT_API_SECRET") or LOCAL_KEY,
            OPENAI_URL: str(openai),
            "OPENAI_API_KEY": self.env.get("OPENAI_API_KEY") or LOCAL_KEY,
        }

    def audio_settings(self, attempt_key: str, impair: str | None = None) -> AudioSettings:
        """The attempt's voice, oracle and impairments: the scenario's own ``impair:`` when it
        has one (checked when its file was loaded), else the run's ``--impair``."""
        assert self._voice is not None, "start() first"
        settings = AudioSettings(
            speak=self._voice.speak,
            before_line=self._oracle(attempt_key),
            listen=self._listener.transcribe if self._listener else None,
        )
        impairments = self.impairments if impair is None else parse_impairments(impair)
        if not impairments.active:
            return settings
        # each attempt's own draws, from the seed and its key (recorded: replayable)
        seed = derive_seed(impairments.seed, attempt_key)
        impairer = Impairer(impairments, seed)

        def report() -> str:
            made = impairer.stats()
            snr = "" if made.snr_db is None else f", SNR {made.snr_db:.1f} dB"
            spec = dataclasses.replace(impairments, seed=seed).describe()
            return f"{spec}: {made.lost} of {made.frames} frames lost{snr}"

        return dataclasses.replace(
            settings,
            frame_filter=impairer.process,
            frame_delay=lambda: impairer.last_delay,
            line_start=impairer.begin_line,
            line_report=report,
        )

    def _oracle(self, attempt_key: str) -> BeforeLine | None:
        server = self._server
        if server is None or self.stt != "oracle":  # a recognizer is told nothing
            return None

        key = server_key(attempt_key)

        def before_line(text: str) -> None:
            server.expect_line(key, text)

        return before_line
