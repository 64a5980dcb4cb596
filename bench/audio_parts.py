"""What audio mode's own parts cost on lk-eval's side, per second of call audio.

Prints figures (no assertions), CPU seconds measured with ``time.process_time`` (this process)
plus its children (espeak-ng): a line spoken by espeak-ng (and again from the run's cache);
impairing one second of the caller's audio (noise, loss, μ-law and Opus round trips); the local
speech server's oracle STT endpointing a second of audio and pocketsphinx recognizing one; an
SVG timeline of a long call. The audio a call carries is real time, so "CPU-s per audio s" is
the share of one core each part takes while a call runs.

    .venv/bin/python bench/audio_parts.py
"""

from __future__ import annotations

import asyncio
import os
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lkeval.audio import FRAME_BYTES, WIRE_RATE
from lkeval.audio.espeak import espeak_pcm
from lkeval.audio.impair import Impairer, parse_impairments
from lkeval.audio.pcm import frames, resample
from lkeval.audio.timeline import Mark, Segment, Timeline, timeline_svg
from lkeval.audio.voice import build_voice
from lkeval.testing.speech_stt import Endpointer

LINE = "Hello, I would like to book a room for two nights, starting on Friday, please."


def cpu() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def measured(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one call."""
    wall, used = time.perf_counter(), cpu()
    fn()
    return time.perf_counter() - wall, cpu() - used


def main() -> None:
    print(f"load average (1 min) at the start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    voice = build_voice("espeak:en-us", {})
    pcm = b""

    def speak() -> None:
        nonlocal pcm
        pcm = asyncio.run(voice.speak(LINE))

    wall, used = measured(speak)
    seconds = len(pcm) / 2 / WIRE_RATE
    print(f"espeak-ng line ({seconds:.2f} s of speech):   {wall:.3f} s wall, {used:.3f} CPU-s")
    wall, used = measured(speak)
    print(
        f"the same line from the run's cache:        {wall * 1e3:.3f} ms wall (asyncio.run incl.)"
    )

    call = pcm * 10  # ~a minute of caller audio
    call_seconds = len(call) / 2 / WIRE_RATE
    for spec in (
        "noise=15dB",
        "loss=3%",
        "jitter=20ms",
        "codec=mulaw",
        "codec=opus",
        "noise=15dB,loss=3%,jitter=20ms,codec=opus",
    ):
        impairer = Impairer(parse_impairments(spec + ",seed=1"))
        chunks = list(frames(call))
        _, used = measured(lambda: [impairer.process(f) for f in chunks])  # noqa: B023
        print(f"impair {spec:<40} {used / call_seconds:.4f} CPU-s per audio s")

    stt_audio = resample(call, WIRE_RATE, 24000)
    step = 24000 // 20 * 2
    endpointer = Endpointer(24000)
    _, used = measured(
        lambda: [endpointer.push(stt_audio[i : i + step]) for i in range(0, len(stt_audio), step)]
    )
    print(f"oracle STT endpointing:                    {used / call_seconds:.4f} CPU-s per audio s")
    try:
        from lkeval.testing.speech_stt import SphinxRecognizer

        recognizer = SphinxRecognizer()
        line16 = asyncio.run(espeak_pcm(LINE, "en-us", 16000))
        _, used = measured(lambda: (recognizer.feed(line16, 16000), recognizer.finish()))
        print(f"pocketsphinx recognition:                  {used / seconds:.3f} CPU-s per audio s")
    except ImportError:
        print("pocketsphinx recognition: not installed (pip install 'lk-eval[speech]')")

    segments = tuple(
        Segment("caller" if i % 2 else "agent", i * 3.0, i * 3.0 + 2.5, LINE) for i in range(200)
    )
    marks = tuple(Mark("first_audio", i * 3.0 + 3.0, 1.2) for i in range(200))
    svg = ""

    def draw() -> None:
        nonlocal svg
        svg = timeline_svg(Timeline(segments, marks, 600.0))

    wall, _ = measured(draw)
    print(
        f"timeline of a 10-minute, 200-turn call:    {wall * 1e3:.1f} ms, {len(svg) / 1024:.0f} KiB"
    )
    print(
        f"one wire frame is {FRAME_BYTES} bytes; load average at the end: {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
