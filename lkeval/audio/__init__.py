"""Audio mode's own parts on lk-eval's side: the caller's voice, impairments, recordings, timelines.

Nothing here is loaded into the agent's interpreter. Audio on the console's wire is 48 kHz mono
16-bit little-endian PCM in 20 ms frames (960 samples); everything in this package speaks that
format unless a function says otherwise, so the driver never converts between modules.
"""

from __future__ import annotations

from lkeval.errors import ConfigError

WIRE_RATE = 48_000
"""Samples per second on the console's wire (the agent resamples to and from its own rate)."""
FRAME_SAMPLES = WIRE_RATE // 50
"""One 20 ms frame: the unit the console carries and impairments drop or delay."""
FRAME_BYTES = FRAME_SAMPLES * 2


class SpeechError(ConfigError):
    """Speech could not be made or understood (espeak-ng missing, a TTS endpoint refused)."""


__all__ = ["FRAME_BYTES", "FRAME_SAMPLES", "WIRE_RATE", "SpeechError"]
