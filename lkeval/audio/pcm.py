"""16-bit mono PCM as bytes: resampling, WAV decoding, 20 ms framing, levels.

PyAV (a livekit-agents dependency) resamples, so no new dependency is needed; numpy measures.
"""

from __future__ import annotations

import io
import math
import wave
from collections.abc import Iterator

import av
import numpy as np

from lkeval.audio import FRAME_BYTES, SpeechError


def resample(pcm: bytes, src_rate: int, dst_rate: int) -> bytes:
    """``pcm`` (mono s16le at ``src_rate``) at ``dst_rate``; unchanged when the rates match."""
    if src_rate == dst_rate or not pcm:
        return pcm
    samples = np.frombuffer(pcm[: len(pcm) // 2 * 2], dtype="<i2").reshape(1, -1)
    frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
    frame.sample_rate = src_rate
    resampler = av.AudioResampler(format="s16", layout="mono", rate=dst_rate)
    out = [*resampler.resample(frame), *resampler.resample(None)]
    return b"".join(f.to_ndarray().astype("<i2").tobytes() for f in out)


def wav_to_pcm(data: bytes, rate: int) -> bytes:
    """The mono s16le samples of a WAV file, at ``rate`` (a stereo file is mixed down)."""
    try:
        with wave.open(io.BytesIO(data)) as wav:
            channels, width = wav.getnchannels(), wav.getsampwidth()
            src_rate, raw = wav.getframerate(), wav.readframes(wav.getnframes())
    except (wave.Error, EOFError) as exc:
        raise SpeechError(f"not a WAV file: {exc}") from None
    if width != 2:
        raise SpeechError(f"WAV with {8 * width}-bit samples: only 16-bit is read")
    samples = np.frombuffer(raw, dtype="<i2")
    if channels > 1:
        samples = samples.reshape(-1, channels).mean(axis=1).astype("<i2")
    return resample(samples.tobytes(), src_rate, rate)


def pcm_to_wav(pcm: bytes, rate: int, channels: int = 1) -> bytes:
    """A WAV file holding interleaved s16le ``pcm``."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(channels)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(pcm)
    return buffer.getvalue()


def frames(pcm: bytes) -> Iterator[bytes]:
    """20 ms wire frames of ``pcm`` (48 kHz), the last one padded with silence."""
    for start in range(0, len(pcm), FRAME_BYTES):
        yield pcm[start : start + FRAME_BYTES].ljust(FRAME_BYTES, b"\0")


def rms(pcm: bytes) -> float:
    """Root mean square of the samples (0.0 for no samples)."""
    samples = np.frombuffer(pcm[: len(pcm) // 2 * 2], dtype="<i2").astype(np.float64)
    return math.sqrt(float(np.mean(samples * samples))) if samples.size else 0.0


def duration(pcm: bytes, rate: int) -> float:
    """Seconds of mono s16le audio."""
    return len(pcm) / 2 / rate


def trim_silence(pcm: bytes, floor: int = 64) -> bytes:
    """``pcm`` without the near-silent samples at either end (a TTS's padding).

    The caller's "stopped speaking" instant is the end of its audio, so padding left in would
    count as the agent's latency.
    """
    samples = np.frombuffer(pcm[: len(pcm) // 2 * 2], dtype="<i2")
    loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > floor)
    if loud.size == 0:
        return b""
    return samples[loud[0] : loud[-1] + 1].tobytes()
