"""Impairments: parsed with errors that name the field, measured from what they produce, and
replayed exactly from a seed."""

from __future__ import annotations

import math

import numpy as np
import pytest
from speech_client import run

from lkeval.audio import FRAME_BYTES, FRAME_SAMPLES, WIRE_RATE
from lkeval.audio.impair import Impairer, Impairments, derive_seed, parse_impairments
from lkeval.audio.voice import EspeakVoice
from lkeval.errors import UsageError

LINE = "Hello, I would like to book a room for two nights, starting on Friday."


@pytest.fixture(scope="module")
def line() -> bytes:
    return run(lambda: EspeakVoice().speak(LINE))


def tone(hz: float, seconds: float, level: float = 8000.0) -> bytes:
    t = np.arange(int(seconds * WIRE_RATE)) / WIRE_RATE
    return (np.sin(2 * np.pi * hz * t) * level).astype("<i2").tobytes()


def samples(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm, dtype="<i2").astype(np.float64)


def test_a_full_spec_parses_and_describes_itself_back() -> None:
    spec = "noise=15dB, loss=3%, burst=60ms, jitter=20ms, codec=mulaw, seed=42"
    parsed = parse_impairments(spec)
    assert parsed == Impairments(15.0, 0.03, 60.0, 20.0, "mulaw", 42)
    assert parsed.describe() == "noise=15dB,loss=3%,burst=60ms,jitter=20ms,codec=mulaw,seed=42"
    assert parse_impairments(parsed.describe()) == parsed
    assert parse_impairments("none") == Impairments()
    assert not Impairments().active and parsed.active


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("noise=loud", r"--impair: noise='loud': expected a number of dB"),
        ("loss=80%", r"loss='80%': must be from 0 to 50 %"),
        ("codec=gsm", r"codec='gsm': mulaw, opus or none"),
        ("seed=-1", r"seed='-1': a whole number"),
        ("echo=1", r"unknown impairment 'echo'"),
        ("loss=3%,loss=4%", r"loss is given twice"),
        ("noise", r"'noise': expected NAME=VALUE"),
        ("burst=5ms", r"burst='5ms': must be from 20 to 1000 ms"),
    ],
)
def test_errors_name_the_bad_field(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_impairments(spec)


def test_a_scenario_file_is_named_instead_of_the_flag() -> None:
    with pytest.raises(UsageError, match=r"^scenarios.yaml:12 impair: noise="):
        parse_impairments("noise=x", where="scenarios.yaml:12 impair")


def impaired(spec: str, pcm: bytes, seed: int | None = None) -> tuple[bytes, Impairer]:
    impairer = Impairer(parse_impairments(spec), seed)
    impairer.calibrate(pcm)
    return impairer.process_line(pcm), impairer


def test_the_same_seed_gives_the_same_bytes_and_another_seed_does_not(line: bytes) -> None:
    spec = "noise=10dB,loss=5%,codec=opus"
    first, _ = impaired(spec, line * 3, seed=7)
    again, _ = impaired(spec, line * 3, seed=7)
    other, _ = impaired(spec, line * 3, seed=8)
    assert first == again
    assert first != other


def test_a_line_is_impaired_the_same_however_long_the_pause_before_it(line: bytes) -> None:
    """The pause before a caller line lasts as long as the agent takes (timing): the line's
    noise and losses are drawn from (seed, line number), not from how many frames went before,
    so the same seed replays the same line byte for byte."""
    spec = "noise=5dB,loss=10%,jitter=20ms,seed=3"

    def after_pause(frames_before: int) -> tuple[bytes, bytes]:
        impairer = Impairer(parse_impairments(spec))
        lines = []
        for _ in range(2):  # two lines, each after its own pause
            for _ in range(frames_before):
                impairer.process(bytes(FRAME_BYTES))
            impairer.begin_line(line)
            lines.append(impairer.process_line(line))
        return lines[0], lines[1]

    short, long = after_pause(7), after_pause(131)
    assert short == long
    assert short[0] != short[1]  # the second line has draws of its own
    assert short[0] != impaired(spec.replace("seed=3", "seed=4"), line)[0]


def test_the_first_line_sets_the_noise_level_as_the_microphone_plays_it(line: bytes) -> None:
    """In a call the microphone tells the impairer each line (``begin_line``): the noise is
    at the asked SNR against the caller's own level, whatever that level is, not against a
    default one."""
    for level in (0.5, 1.0, 2.0):
        loud = (samples(line) * level).astype("<i2").tobytes()
        impairer = Impairer(parse_impairments("noise=5dB,seed=3"))
        for _ in range(50):  # the pause before the caller speaks: noise at the default level
            impairer.process(bytes(FRAME_BYTES))
        impairer.begin_line(loud)
        impairer.process_line(loud)
        assert impairer.stats().snr_db == pytest.approx(5.0, abs=0.3), level


def test_the_noise_is_at_the_asked_snr_measured_from_the_bytes(line: bytes) -> None:
    out, impairer = impaired("noise=15dB,seed=3", line)
    clean = samples(line.ljust(len(out), b"\0"))
    noise = samples(out) - clean
    active = np.array(
        [np.sqrt(np.mean(f * f)) > 300 for f in clean.reshape(-1, FRAME_SAMPLES)]
    ).repeat(FRAME_SAMPLES)
    measured = 10 * math.log10(np.sum(clean[active] ** 2) / np.sum(noise[active] ** 2))
    assert measured == pytest.approx(15.0, abs=0.3)
    assert impairer.stats().snr_db == pytest.approx(measured, abs=0.3)
    # The noise is there in the pauses too (a room does not go quiet between words).
    assert np.sqrt(np.mean(noise[~active] ** 2)) > 100


def test_loss_comes_in_bursts_at_the_asked_average() -> None:
    impairer = Impairer(parse_impairments("loss=3%,burst=60ms,seed=11"))
    lost = [impairer.process(bytes(FRAME_BYTES)) is None for _ in range(20_000)]
    assert sum(lost) / len(lost) == pytest.approx(0.03, abs=0.006)
    assert impairer.stats().lost == sum(lost)
    bursts, run_length = [], 0
    for gone in [*lost, False]:
        if gone:
            run_length += 1
        elif run_length:
            bursts.append(run_length)
            run_length = 0
    assert np.mean(bursts) == pytest.approx(3.0, abs=0.4)  # 60 ms = 3 frames


def test_a_lost_frame_becomes_silence_in_a_line() -> None:
    out, impairer = impaired("loss=20%,seed=5", tone(440, 2.0))
    gone = [
        f == bytes(FRAME_BYTES)
        for f in (out[i : i + FRAME_BYTES] for i in range(0, len(out), FRAME_BYTES))
    ]
    assert sum(gone) == impairer.stats().lost > 0


def test_adding_loss_does_not_change_the_noise_of_the_frames_kept(line: bytes) -> None:
    noisy, _ = impaired("noise=20dB,seed=9", line)
    lossy, _ = impaired("noise=20dB,loss=10%,seed=9", line)
    pairs = [
        (noisy[i : i + FRAME_BYTES], lossy[i : i + FRAME_BYTES])
        for i in range(0, len(noisy), FRAME_BYTES)
    ]
    kept = [(a, b) for a, b in pairs if b != bytes(FRAME_BYTES)]
    assert kept and all(a == b for a, b in kept)


def level_after(spec: str, hz: float) -> float:
    out, _ = impaired(spec + ",seed=1", tone(hz, 1.0))
    return float(np.sqrt(np.mean(samples(out)[WIRE_RATE // 10 :] ** 2)))


def test_mulaw_narrows_the_voice_to_telephone_band() -> None:
    before = float(np.sqrt(np.mean(samples(tone(440, 1.0)) ** 2)))
    assert level_after("codec=mulaw", 440) == pytest.approx(before, rel=0.1)
    assert level_after("codec=mulaw", 10_000) < before * 0.05  # above 4 kHz: gone


def test_opus_keeps_a_voice_band_tone() -> None:
    before = float(np.sqrt(np.mean(samples(tone(440, 1.0)) ** 2)))
    assert level_after("codec=opus", 440) == pytest.approx(before, rel=0.2)


def test_jitter_delays_frames_in_order_around_the_asked_mean() -> None:
    impairer = Impairer(parse_impairments("jitter=20ms,seed=4"))
    arrivals = []
    for index in range(2000):
        impairer.process(bytes(FRAME_BYTES))
        assert impairer.last_delay >= 0.0
        arrivals.append(index * 0.02 + impairer.last_delay)
    assert arrivals == sorted(arrivals)  # in order
    stats = impairer.stats()
    assert stats.mean_delay_ms == pytest.approx(20.0, abs=4.0)
    assert stats.max_delay_ms <= 60.0


def test_a_frame_must_be_20_ms() -> None:
    with pytest.raises(ValueError, match="1920 bytes"):
        Impairer(Impairments()).process(b"\0" * 100)


def test_per_scenario_seeds_are_stable_and_distinct() -> None:
    assert derive_seed(1, "greeting") == derive_seed(1, "greeting")
    assert (
        len({derive_seed(1, "greeting"), derive_seed(1, "booking"), derive_seed(2, "greeting")})
        == 3
    )
