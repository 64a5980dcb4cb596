"""The call's timeline picture and its recording: what they show, that they stay small, and that
the text in them is inert."""

from __future__ import annotations

import wave
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from lkeval.audio.recording import write_wav
from lkeval.audio.timeline import (
    Mark,
    Segment,
    Timeline,
    overlaps,
    silences,
    timeline_svg,
)
from lkeval.errors import OutputError
from lkeval.text.masking import register_secret, reset_process_masker

SVG = "{http://www.w3.org/2000/svg}"
CALL = Timeline(
    segments=(
        Segment("caller", 0.5, 2.8, "Hi, I need a room for two nights."),
        Segment("agent", 5.1, 9.7, "Sure! Which dates?"),
        Segment("caller", 8.9, 10.5, "Friday to Sunday."),
        Segment("agent", 12.9, 14.0, "Done."),
    ),
    marks=(
        Mark("eot", 3.2, 0.87),
        Mark("first_audio", 5.1, 2.3, "turn 1"),
        Mark("interruption", 9.7, None, "caller barged in"),
        Mark("false_interruption", 11.0),
        Mark("first_audio", 12.9, 2.4, "turn 2"),
    ),
    duration=15.0,
)


def titles(svg: str) -> list[str]:
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{SVG}title")]


def test_overlaps_and_silences_are_found() -> None:
    assert overlaps(CALL.segments) == [(8.9, 9.7)]
    assert silences(CALL.segments, 1.0) == [(2.8, 5.1), (10.5, 12.9)]
    assert silences(CALL.segments, 3.0) == []


def test_the_picture_shows_each_turn_overlap_interruption_and_latency() -> None:
    svg = timeline_svg(CALL)
    shown = titles(svg)
    assert shown[0] == "call timeline, 15.0 s"
    assert "caller 0.50–2.80 s: Hi, I need a room for two nights." in shown
    assert "agent 12.90–14.00 s: Done." in shown
    assert "overlap 0.80 s" in shown
    assert "interruption at 9.70 s caller barged in" in shown
    assert "false interruption at 11.00 s " in shown
    assert "end of turn at 3.20 s (probability 0.87) " in shown
    assert "first audio 2.30 s after the caller stopped turn 1" in shown
    texts = [t.text for t in ET.fromstring(svg).iter(f"{SVG}text")]
    assert {"2.30 s", "2.40 s", "silence 2.3 s", "silence 2.4 s"} <= set(texts)


def test_the_same_timeline_draws_the_same_bytes() -> None:
    assert timeline_svg(CALL) == timeline_svg(CALL)


def test_spoken_text_is_escaped_masked_and_inert() -> None:
    reset_process_masker()
    register_secret("sk-live-SECRET123")
    try:
        hostile = Segment(
            "agent", 0, 3, '</title><script>alert(1)</script> "quoted" \x1b[31m sk-live-SECRET123'
        )
        svg = timeline_svg(Timeline((hostile,), (), 3.0))
    finally:
        reset_process_masker()
    root = ET.fromstring(svg)  # well-formed XML
    assert not list(root.iter(f"{SVG}script"))
    assert "SECRET123" not in svg
    assert "\x1b" not in svg
    assert "&lt;script&gt;" in svg


def test_a_huge_call_stays_a_small_picture() -> None:
    segments = tuple(
        Segment("caller" if i % 2 else "agent", i * 1.0, i * 1.0 + 0.9, "word " * 500)
        for i in range(5000)
    )
    marks = tuple(Mark("first_audio", i + 0.5, 0.4, "x" * 1000) for i in range(5000))
    svg = timeline_svg(Timeline(segments, marks, 5000.0))
    assert len(svg.encode()) < 200_000
    assert "9400 more not drawn" in svg
    ET.fromstring(svg)


def test_an_empty_call_still_draws() -> None:
    svg = timeline_svg(Timeline((), (), 0.0))
    assert titles(svg)[0] == "call timeline, 0.0 s"


def tone(seconds: float, hz: float, rate: int = 48000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    return (np.sin(2 * np.pi * hz * t) * 8000).astype("<i2").tobytes()


def test_the_recording_is_stereo_caller_left_agent_right(tmp_path: Path) -> None:
    recording = write_wav(tmp_path / "call.wav", tone(1.0, 300), tone(2.0, 600))
    assert recording.seconds == pytest.approx(2.0, abs=0.01) and not recording.truncated
    with wave.open(str(recording.path)) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (2, 2, 16000)
        data = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2").reshape(-1, 2)
    left, right = data[:, 0].astype(float), data[:, 1].astype(float)
    assert np.sqrt(np.mean(left[:16000] ** 2)) > 4000  # the caller's second
    assert np.sqrt(np.mean(left[17000:] ** 2)) == 0  # then silence on the left
    assert np.sqrt(np.mean(right**2)) > 4000
    assert recording.size == (tmp_path / "call.wav").stat().st_size
    assert not list(tmp_path.glob("*.partial"))


def test_a_long_recording_is_cut_to_the_cap(tmp_path: Path) -> None:
    recording = write_wav(tmp_path / "call.wav", tone(10.0, 300), b"", max_bytes=64_044)
    assert recording.truncated
    assert recording.size <= 64_044
    assert recording.seconds == pytest.approx(1.0, abs=0.01)


def test_an_unwritable_recording_names_its_path(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(OutputError, match=r"file/call.wav: cannot write"):
        write_wav(blocker / "call.wav", tone(0.1, 300), b"")


def test_call_files_sit_side_by_side_with_safe_distinct_names(tmp_path: Path) -> None:
    from lkeval.audio.artifacts import call_file_stem, write_call_files

    files = write_call_files(tmp_path, "../../etc/passwd booking", 2, CALL, tone(1, 300), b"")
    assert files.recording.path.parent == tmp_path == files.timeline.parent
    assert files.recording.path.stem == files.timeline.stem
    assert (
        files.timeline.name.startswith("etc-passwd-booking-") and "attempt2" in files.timeline.name
    )
    ET.fromstring(files.timeline.read_text(encoding="utf-8"))
    # Ids that reduce to the same characters still get their own files.
    assert call_file_stem("a/b") != call_file_stem("a:b")
    assert call_file_stem("...").startswith("scenario-")
