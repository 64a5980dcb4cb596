"""The local speech server's speech-to-text: where an utterance starts and ends, and what it said.

Endpointing is by energy against a noise floor that follows the input, so a caller line with
noise mixed in (``--impair noise=15dB``) still starts and ends where the speech does. An
utterance ends after :data:`ENDPOINT_SILENCE` seconds of quiet (longer than espeak-ng's pauses
between sentences, about 0.35 s) or when the client finalizes (the agent's VAD saw the end).

What it said comes from a :class:`Recognizer`:

* the oracle: the next line lk-eval announced for this attempt (``expect_line``). The agent hears
  exactly what the caller said, at a stable moment: this tests turn-taking and latency, not
  recognition.
* pocketsphinx (``pip install lk-eval[speech]``): a real, weak recognizer whose English model
  ships inside its wheel; it garbles synthetic speech and costs ~0.6 CPU-s per audio second.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

from lkeval.audio.pcm import resample

ENDPOINT_SILENCE = 0.5
"""Seconds of quiet that end an utterance."""
INTERIM_AFTER = 0.3
"""Seconds into an utterance when the oracle sends its interim transcript (as providers do)."""
WINDOW_SECONDS = 0.01
MIN_SPEECH_RMS = 300.0
"""Below this a window is quiet whatever the noise floor (s16 full scale is 32767)."""
FLOOR_FACTOR = 4.0
"""Speech starts when a window's level is this many times the noise floor (12 dB)."""
FLOOR_SECONDS = 3.0
"""How far back the noise floor looks (longer than any stretch of speech without a gap)."""
ONSET_WINDOWS = 3
"""Consecutive loud windows that start an utterance (a click does not)."""

SttEngine = Literal["oracle", "pocketsphinx"]


@dataclass
class AttemptSpeech:
    """What one attempt's agent was told and said: the oracle's queue and both transcripts."""

    expected: deque[str] = field(default_factory=deque)
    heard: list[str] = field(default_factory=list)
    spoken: list[str] = field(default_factory=list)


@dataclass
class Endpointer:
    """Turns a stream of s16le audio into utterance starts and ends (seconds of stream time).

    The noise floor is the quietest window of the last :data:`FLOOR_SECONDS` (a sliding
    minimum): steady noise raises it within that time, while speech, which always pauses
    between words, does not. Hysteresis: an utterance starts 12 dB above the floor and goes on
    while the level stays 6 dB above it.
    """

    rate: int
    position: float = 0.0
    speaking: bool = False
    started_at: float = 0.0
    quiet_for: float = 0.0
    _loud_run: int = 0
    _index: int = 0
    _rest: bytes = b""
    _minima: deque[tuple[int, float]] = field(default_factory=deque)

    def push(self, pcm: bytes) -> list[tuple[Literal["start", "end"], float]]:
        """Feed audio; the utterance boundaries it crossed, in order."""
        data = self._rest + pcm
        step = max(2, int(self.rate * WINDOW_SECONDS) * 2)
        usable = len(data) // step * step
        self._rest = data[usable:]
        if usable == 0:
            return []
        windows = (
            np.frombuffer(data[:usable], dtype="<i2").astype(np.float64).reshape(-1, step // 2)
        )
        levels = np.sqrt(np.mean(windows * windows, axis=1))
        events: list[tuple[Literal["start", "end"], float]] = []
        for level in levels:
            self.position += WINDOW_SECONDS
            events += self._window(float(level))
        return events

    def _floor(self, level: float) -> float:
        """The sliding minimum of the window levels, this one included."""
        self._index += 1
        while self._minima and self._minima[-1][1] >= level:
            self._minima.pop()
        self._minima.append((self._index, level))
        while self._minima[0][0] <= self._index - FLOOR_SECONDS / WINDOW_SECONDS:
            self._minima.popleft()
        return self._minima[0][1]

    def _window(self, level: float) -> list[tuple[Literal["start", "end"], float]]:
        floor = self._floor(level)
        factor = FLOOR_FACTOR if not self.speaking else FLOOR_FACTOR / 2
        loud = level > max(MIN_SPEECH_RMS, floor * factor)
        self._loud_run = self._loud_run + 1 if loud else 0
        if not self.speaking:
            if self._loud_run >= ONSET_WINDOWS:
                self.speaking, self.quiet_for = True, 0.0
                self.started_at = self.position - ONSET_WINDOWS * WINDOW_SECONDS
                return [("start", self.started_at)]
            return []
        self.quiet_for = 0.0 if loud else self.quiet_for + WINDOW_SECONDS
        if self.quiet_for >= ENDPOINT_SILENCE - 1e-9:
            return [("end", self.close())]
        return []

    def close(self) -> float:
        """End the utterance now (a finalize); when its speech ended."""
        self.speaking, self._loud_run = False, 0
        return self.position - self.quiet_for


class Recognizer(Protocol):
    """Says what an utterance said; ``feed`` gets its audio as it arrives."""

    def feed(self, pcm: bytes, rate: int) -> None: ...

    def finish(self) -> str: ...

    def preview(self) -> str | None: ...


@dataclass
class OracleRecognizer:
    """The next line lk-eval announced for the attempt; the audio itself is not listened to."""

    speech: AttemptSpeech

    def feed(self, pcm: bytes, rate: int) -> None:
        """Nothing to do: the oracle knows the words already."""

    def preview(self) -> str | None:
        """The line about to be recognized (for an interim transcript), if one is announced."""
        return self.speech.expected[0] if self.speech.expected else None

    def finish(self) -> str:
        """The announced line ("" for speech nobody announced: noise, or a stray sound)."""
        return self.speech.expected.popleft() if self.speech.expected else ""


class SphinxRecognizer:
    """pocketsphinx over the utterance, fed at 16 kHz as it arrives (the optional extra)."""

    def __init__(self) -> None:
        from pocketsphinx import Decoder  # the optional extra: imported only when asked for

        self._decoder = Decoder(samprate=16000, loglevel="FATAL")
        self._started = False

    def feed(self, pcm: bytes, rate: int) -> None:
        """Decode more of the utterance."""
        if not self._started:
            self._decoder.start_utt()
            self._started = True
        self._decoder.process_raw(resample(pcm, rate, 16000), False, False)

    def preview(self) -> str | None:
        """No interim transcripts (decoding twice would double the CPU)."""
        return None

    def finish(self) -> str:
        """The decoder's best hypothesis for the utterance."""
        if not self._started:
            return ""
        self._decoder.end_utt()
        self._started = False
        hypothesis = self._decoder.hyp()
        return hypothesis.hypstr if hypothesis is not None else ""


def recognizer_factory(engine: SttEngine, speech: AttemptSpeech) -> Callable[[], Recognizer]:
    """A maker of recognizers for one STT session of the attempt."""
    if engine == "pocketsphinx":
        return SphinxRecognizer
    return lambda: OracleRecognizer(speech)


def words_of(text: str, start: float, duration: float) -> list[dict[str, object]]:
    """Word timings spread evenly over the utterance (providers send per-word times)."""
    words = text.split()
    if not words:
        return []
    each = duration / len(words)
    return [
        {"word": w, "start": start + i * each, "end": start + (i + 1) * each, "confidence": 1.0}
        for i, w in enumerate(words)
    ]


def is_finite_rate(value: object, default: int) -> int:
    """A sample rate from a client's settings (sent as a string), or ``default``."""
    try:
        rate = int(str(value))
    except ValueError:
        return default
    return rate if 8000 <= rate <= 96000 and math.isfinite(rate) else default
