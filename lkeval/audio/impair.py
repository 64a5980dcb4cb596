"""Impairments of the caller's audio: noise, bursty packet loss, jitter, a codec round trip.

A real caller is heard through a noisy room, a lossy network and a codec. ``--impair
noise=15dB,loss=3%,jitter=20ms,codec=mulaw`` (or a scenario's ``impair:``) plays the caller's
audio through the same, per 20 ms frame:

* ``noise=N dB``: white noise at that signal-to-noise ratio against the caller's speech level,
  present in the pauses too (a room does not go quiet between lines);
* ``codec=mulaw|opus``: G.711 μ-law at 8 kHz, or Opus at 24 kbit/s;
* ``loss=P%`` with ``burst=N ms`` (default 40 ms): packets lost in bursts, a two-state
  Gilbert-Elliott chain on 20 ms frames whose average loss is P; a lost frame is silence;
* ``jitter=N ms``: each frame is held back by a delay drawn from 0 to 2N ms (mean N), frames
  kept in order, as a network without a jitter buffer delivers them.

Every draw comes from ``seed`` (one independent stream per impairment), and each caller line's
draws start afresh from (``seed``, the line's number) when the microphone starts it
(:meth:`Impairer.begin_line`): a line is impaired the same way however long the pause before it
lasted (which depends on the agent's timing), so the same seed replays the same line byte for
byte; the results record it. :meth:`Impairer.stats` reports the loss and
the signal-to-noise ratio actually produced.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lkeval.audio import FRAME_BYTES, FRAME_SAMPLES
from lkeval.audio.codec import CodecRoundTrip
from lkeval.audio.pcm import frames, rms
from lkeval.impairments import Impairments, parse_impairments

__all__ = [
    "Impairer",
    "ImpairmentStats",
    "Impairments",
    "derive_seed",
    "parse_impairments",
]

FRAME_SECONDS = FRAME_SAMPLES / 48_000
DEFAULT_SPEECH_RMS = 2000.0
"""The speech level noise is set against before a line calibrates it (espeak-ng's is ~2200)."""
ACTIVE_RMS = 300.0
"""A clean frame above this level is speech, for the measured signal-to-noise ratio."""


def derive_seed(run_seed: int, *names: str) -> int:
    """A per-scenario (per-attempt) seed from the run's: stable, and different per name."""
    digest = hashlib.sha256(":".join([str(run_seed), *names]).encode()).digest()
    return int.from_bytes(digest[:6], "big")


@dataclass(frozen=True)
class ImpairmentStats:
    """What the impairments actually did to one stream."""

    frames: int
    lost: int
    snr_db: float | None
    mean_delay_ms: float
    max_delay_ms: float

    @property
    def loss(self) -> float:
        """The share of frames lost."""
        return self.lost / self.frames if self.frames else 0.0

    def as_dict(self) -> dict[str, Any]:
        """For results.json."""
        snr = None if self.snr_db is None else round(self.snr_db, 2)
        return {
            "frames": self.frames,
            "lost": self.lost,
            "loss": round(self.loss, 4),
            "snr_db": snr,
            "mean_delay_ms": round(self.mean_delay_ms, 1),
            "max_delay_ms": round(self.max_delay_ms, 1),
        }


@dataclass
class _Tally:
    frames: int = 0
    lost: int = 0
    signal_energy: float = 0.0
    noise_energy: float = 0.0
    delays: list[float] = field(default_factory=list)


class Impairer:
    """Impairs one caller stream, frame by frame, from ``seed`` (one Impairer per stream)."""

    def __init__(self, impairments: Impairments, seed: int | None = None) -> None:
        self.impairments = impairments
        self.seed = impairments.seed if seed is None else seed
        self._lines = 0
        self._seed_streams(np.random.SeedSequence(self.seed))
        self._codec = CodecRoundTrip(impairments.codec) if impairments.codec else None
        self._speech_rms = DEFAULT_SPEECH_RMS
        self._released = 0.0
        self._tally = _Tally()
        self.last_delay = 0.0
        """Seconds to hold back the frame :meth:`process` just returned (jitter)."""

    def _seed_streams(self, seed: np.random.SeedSequence) -> None:
        noise_seq, loss_seq, jitter_seq = seed.spawn(3)
        self._noise_rng = np.random.default_rng(noise_seq)
        self._loss_rng = np.random.default_rng(loss_seq)
        self._jitter_rng = np.random.default_rng(jitter_seq)
        self._bad = False  # a line starts in the Gilbert-Elliott chain's good state

    def begin_line(self, line: bytes) -> None:
        """The next frame is the first of ``line`` (the caller's speech): its draws start from
        (seed, line number), and the first line sets the noise level (:meth:`calibrate`)."""
        self._lines += 1
        self._seed_streams(np.random.SeedSequence([self.seed, self._lines]))
        if self._lines == 1:
            self.calibrate(line)

    def calibrate(self, line: bytes) -> None:
        """Set the noise level against this line's speech level (call with the first line)."""
        active = [f for f in frames(line) if rms(f) > ACTIVE_RMS]
        if active:
            self._speech_rms = rms(b"".join(active))

    def process(self, frame: bytes) -> bytes | None:
        """One 20 ms wire frame through noise, codec and network; ``None`` if it was lost.

        A lost frame still advances the codec (the decoder conceals with silence) and the
        clocks, so what follows stays in time.
        """
        if len(frame) != FRAME_BYTES:
            raise ValueError(f"a wire frame is {FRAME_BYTES} bytes, not {len(frame)}")
        index = self._tally.frames
        self._tally.frames += 1
        heard = self._add_noise(frame)
        lost = self._lose()
        if self._codec is not None:
            packets = self._codec.encode(heard)
            heard = self._codec.decode(None if lost else packets)
        self._tally.lost += lost
        self.last_delay = self._delay(index)
        return None if lost else heard

    def process_line(self, pcm: bytes) -> bytes:
        """A whole line, frame by frame; lost frames become silence (jitter does not apply)."""
        return b"".join(self.process(f) or bytes(FRAME_BYTES) for f in frames(pcm))

    def stats(self) -> ImpairmentStats:
        """The loss, signal-to-noise ratio and delays produced so far."""
        tally = self._tally
        snr = None
        if self.impairments.noise_db is not None and tally.noise_energy > 0:
            snr = 10 * math.log10(tally.signal_energy / tally.noise_energy)
        delays = tally.delays or [0.0]
        return ImpairmentStats(
            frames=tally.frames,
            lost=tally.lost,
            snr_db=snr,
            mean_delay_ms=1000 * sum(delays) / len(delays),
            max_delay_ms=1000 * max(delays),
        )

    def _add_noise(self, frame: bytes) -> bytes:
        snr = self.impairments.noise_db
        if snr is None:
            return frame
        clean = np.frombuffer(frame, dtype="<i2").astype(np.float64)
        sigma = self._speech_rms / 10 ** (snr / 20)
        noise = self._noise_rng.normal(0.0, sigma, FRAME_SAMPLES)
        if rms(frame) > ACTIVE_RMS:
            self._tally.signal_energy += float(np.sum(clean * clean))
            self._tally.noise_energy += float(np.sum(noise * noise))
        return np.clip(np.rint(clean + noise), -32768, 32767).astype("<i2").tobytes()

    def _lose(self) -> bool:
        """A step of the Gilbert-Elliott chain: every frame in the bad state is lost."""
        loss = self.impairments.loss
        if not loss:
            return False
        leave_bad = min(1.0, FRAME_SECONDS * 1000 / self.impairments.burst_ms)
        enter_bad = min(1.0, loss * leave_bad / (1 - loss))
        draw = self._loss_rng.random()
        self._bad = draw >= leave_bad if self._bad else draw < enter_bad
        return self._bad

    def _delay(self, index: int) -> float:
        jitter = self.impairments.jitter_ms / 1000
        if not jitter:
            return 0.0
        due = index * FRAME_SECONDS
        arrives = max(due + self._jitter_rng.uniform(0, 2 * jitter), self._released)
        self._released = arrives
        self._tally.delays.append(arrives - due)
        return arrives - due
