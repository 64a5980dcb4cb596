"""A codec round trip on the caller's 20 ms frames: encode, (maybe lose the packet), decode.

What a phone line or a WebRTC client does to a voice before the agent hears it: G.711 μ-law
narrows it to 8 kHz and 8 bits, Opus compresses it at a VoIP bit rate. PyAV (a livekit-agents
dependency) has both codecs. Encoder and decoder keep their state across frames, as on a real
call, so one :class:`CodecRoundTrip` serves one caller stream.
"""

from __future__ import annotations

import fractions
from typing import Any, Literal, cast

import av
import numpy as np

from lkeval.audio import FRAME_SAMPLES, WIRE_RATE

CodecName = Literal["mulaw", "opus"]
#: (PyAV codec, its sample rate, bit rate or None)
_CODECS: dict[str, tuple[str, int, int | None]] = {
    "mulaw": ("pcm_mulaw", 8000, None),
    "opus": ("libopus", WIRE_RATE, 24_000),
}


class CodecRoundTrip:
    """Encode one wire frame into a packet, and decode a packet (or nothing, if lost) back."""

    def __init__(self, codec: CodecName) -> None:
        name, self._rate, bit_rate = _CODECS[codec]
        # Audio contexts (PyAV's stubs type ``create`` as the base class).
        self._encoder: Any = cast(Any, av.CodecContext.create(name, "w"))
        self._decoder: Any = cast(Any, av.CodecContext.create(name, "r"))
        for context in (self._encoder, self._decoder):
            context.sample_rate = self._rate
            context.layout = "mono"
        self._encoder.format = "s16"
        self._encoder.time_base = fractions.Fraction(1, self._rate)
        if bit_rate is not None:
            self._encoder.bit_rate = bit_rate
        self._encoder.open()
        self._decoder.open()
        self._down = av.AudioResampler(format="s16", layout="mono", rate=self._rate)
        self._up = av.AudioResampler(format="s16", layout="mono", rate=WIRE_RATE)
        self._pts = 0
        self._pending = np.zeros(0, dtype="<i2")
        # The resamplers' filter delay: the first frames come out short, padded here once.
        self._out = np.zeros(0, dtype="<i2")

    def encode(self, frame: bytes) -> list[bytes]:
        """The packets of one 20 ms wire frame (usually one)."""
        pcm = np.frombuffer(frame, dtype="<i2").reshape(1, -1)
        wire = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
        wire.sample_rate = WIRE_RATE
        samples = [self._pending]
        samples += [f.to_ndarray().reshape(-1) for f in self._down.resample(wire)]
        joined = np.concatenate(samples).astype("<i2")
        step = self._rate // 50
        usable = len(joined) // step * step
        self._pending = joined[usable:]
        packets: list[bytes] = []
        for start in range(0, usable, step):
            chunk = joined[start : start + step].reshape(1, -1)
            frame_in = av.AudioFrame.from_ndarray(chunk, format="s16", layout="mono")
            frame_in.sample_rate, frame_in.pts = self._rate, self._pts
            self._pts += step
            packets += [bytes(p) for p in self._encoder.encode(frame_in)]
        return packets

    def decode(self, packets: list[bytes] | None) -> bytes:
        """One 20 ms wire frame from the packets; ``None`` (lost) decodes to silence."""
        if packets is None:
            decoded = [np.zeros(self._rate // 50, dtype="<i2")]
        else:
            decoded = [
                f.to_ndarray().reshape(-1).astype("<i2")
                for p in packets
                for f in self._decoder.decode(av.Packet(p))
            ]
        parts = [self._out]
        for samples in decoded:
            narrow = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
            narrow.sample_rate = self._rate
            parts += [f.to_ndarray().reshape(-1) for f in self._up.resample(narrow)]
        joined = np.concatenate(parts).astype("<i2")
        if len(joined) < FRAME_SAMPLES:  # the start of the stream: the filters' delay
            joined = np.concatenate([np.zeros(FRAME_SAMPLES - len(joined), "<i2"), joined])
        self._out = joined[FRAME_SAMPLES:]
        return joined[:FRAME_SAMPLES].tobytes()
