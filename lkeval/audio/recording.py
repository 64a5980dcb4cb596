"""A scenario's call as one stereo WAV file: the caller on the left, the agent on the right.

Both sides are laid on one clock (sample 0 is the start of the call) by the driver; this module
only writes them. Stored at 16 kHz, which keeps all of a voice (telephone speech is 8 kHz), so
a minute costs 3.7 MiB; a file is capped like an agent's log, and a longer call keeps its
beginning and says it was cut.
"""

from __future__ import annotations

import contextlib
import os
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lkeval.audio import WIRE_RATE
from lkeval.audio.pcm import resample
from lkeval.errors import OutputError

STORE_RATE = 16_000
MAX_BYTES = 16 * 1024 * 1024
"""A recording's cap: ~4.4 minutes of stereo 16 kHz (a scenario's call is rarely longer; one
that is has usually gone round in circles, and its beginning is what explains it)."""
_HEADER = 44


@dataclass(frozen=True)
class Recording:
    """What was written: where, how long, and whether the call was cut to fit."""

    path: Path
    seconds: float
    truncated: bool
    size: int


def stereo(pcm_left: bytes, pcm_right: bytes) -> bytes:
    """Two mono s16le tracks interleaved, the shorter padded with silence."""
    left = np.frombuffer(pcm_left[: len(pcm_left) // 2 * 2], dtype="<i2")
    right = np.frombuffer(pcm_right[: len(pcm_right) // 2 * 2], dtype="<i2")
    both = np.zeros((max(left.size, right.size), 2), dtype="<i2")
    both[: left.size, 0] = left
    both[: right.size, 1] = right
    return both.tobytes()


def write_wav(
    path: str | os.PathLike[str],
    pcm_caller: bytes,
    pcm_agent: bytes,
    rate: int = WIRE_RATE,
    *,
    max_bytes: int = MAX_BYTES,
    store_rate: int = STORE_RATE,
) -> Recording:
    """Write the call (mono s16le tracks at ``rate``) as a stereo WAV: L caller, R agent.

    Raises :class:`OutputError` naming ``path`` when it cannot be written.
    """
    target = Path(path)
    frames = stereo(resample(pcm_caller, rate, store_rate), resample(pcm_agent, rate, store_rate))
    limit = max(0, (max_bytes - _HEADER) // 4 * 4)
    truncated = len(frames) > limit
    frames = frames[:limit]
    partial = target.with_name(target.name + ".partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with wave.open(str(partial), "wb") as wav:
            wav.setnchannels(2)
            wav.setsampwidth(2)
            wav.setframerate(store_rate)
            wav.writeframes(frames)
        partial.replace(target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        raise OutputError(str(target), exc.strerror or type(exc).__name__) from None
    return Recording(target, len(frames) / 4 / store_rate, truncated, target.stat().st_size)
