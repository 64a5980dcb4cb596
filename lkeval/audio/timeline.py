"""A call's timeline: who spoke when, silences, overlaps, interruptions, each turn's latency.

The data (:class:`Timeline`) is what the driver measured; :func:`timeline_svg` draws it as a
self-contained SVG a reviewer opens from the report: two lanes (caller, agent) on one time
axis, overlaps shaded red, silences of a second or more labelled, a bracket under each agent
turn from the end of the caller's speech to the agent's first audio, interruptions as vertical
lines. The picture is bounded (segments, marks and text are capped), and every piece of text in
it (the lines spoken, which may hold anything) is masked, made inert and XML-escaped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Literal

from lkeval.text.masking import clip
from lkeval.text.untrusted import visible

MAX_SEGMENTS = 300
MAX_MARKS = 300
TEXT_CHARS = 160
WIDTH = 1000.0
LEFT, RIGHT = 60.0, 20.0
LANE_Y = {"caller": 30.0, "agent": 80.0}
LANE_HEIGHT = 30.0
HEIGHT = 190.0
SILENCE_LABEL_SECONDS = 1.0
COLOURS = {"caller": "#1e88e5", "agent": "#43a047"}
MARK_NAMES = {
    "interruption": "interruption",
    "false_interruption": "false interruption",
    "eot": "end of turn",
}
MARK_COLOURS = {"interruption": "#e53935", "false_interruption": "#fb8c00", "eot": "#6d4c41"}


@dataclass(frozen=True)
class Segment:
    """One stretch of speech by one side (seconds from the start of the call)."""

    speaker: Literal["caller", "agent"]
    start: float
    end: float
    text: str = ""


@dataclass(frozen=True)
class Mark:
    """An instant worth marking.

    ``first_audio``: ``at`` the agent's first audio of a turn, ``value`` the latency (seconds
    since the caller stopped). ``interruption``/``false_interruption``: ``at`` when the agent was
    cut off (or resumed). ``eot``: the turn detector's decision, ``value`` its probability.
    """

    kind: Literal["first_audio", "interruption", "false_interruption", "eot"]
    at: float
    value: float | None = None
    note: str = ""


@dataclass(frozen=True)
class Timeline:
    """Everything the picture shows; ``duration`` is the length of the call in seconds."""

    segments: tuple[Segment, ...]
    marks: tuple[Mark, ...]
    duration: float


def overlaps(segments: tuple[Segment, ...] | list[Segment]) -> list[tuple[float, float]]:
    """Stretches where the caller and the agent speak at once, in time order."""
    caller = [s for s in segments if s.speaker == "caller"]
    agent = [s for s in segments if s.speaker == "agent"]
    found = [
        (max(c.start, a.start), min(c.end, a.end))
        for c in caller
        for a in agent
        if min(c.end, a.end) > max(c.start, a.start)
    ]
    return sorted(found)


def silences(
    segments: tuple[Segment, ...] | list[Segment], at_least: float
) -> list[tuple[float, float]]:
    """Stretches of at least ``at_least`` seconds where nobody speaks, between speech."""
    spans = sorted((s.start, s.end) for s in segments)
    found, reached = [], None
    for start, end in spans:
        if reached is not None and start - reached >= at_least:
            found.append((reached, start))
        reached = end if reached is None else max(reached, end)
    return found


def _tick_step(duration: float) -> float:
    for step in (0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600):
        if duration / step <= 12:
            return step
    return 10 ** math.ceil(math.log10(duration / 12))


def _text(value: str, limit: int = TEXT_CHARS) -> str:
    return escape(clip(visible(" ".join(value.split())), limit), quote=True)


class _Canvas:
    def __init__(self, duration: float) -> None:
        self.duration = max(duration, 0.001)
        self.parts: list[str] = []

    def x(self, seconds: float) -> float:
        inner = WIDTH - LEFT - RIGHT
        return LEFT + inner * min(max(seconds, 0.0), self.duration) / self.duration

    def add(self, element: str) -> None:
        self.parts.append(element)


def _axis(canvas: _Canvas) -> None:
    step = _tick_step(canvas.duration)
    for lane, y in LANE_Y.items():
        canvas.add(f'<text x="8" y="{y + 19:.1f}">{lane}</text>')
    for i in range(int(canvas.duration / step) + 1):
        x = canvas.x(i * step)
        canvas.add(f'<line x1="{x:.1f}" y1="20" x2="{x:.1f}" y2="122" stroke="#e0e0e0"/>')
        canvas.add(f'<text x="{x:.1f}" y="134" text-anchor="middle">{i * step:g} s</text>')


def _segments(canvas: _Canvas, segments: tuple[Segment, ...]) -> None:
    for s in segments:
        x, y = canvas.x(s.start), LANE_Y[s.speaker]
        width = max(canvas.x(s.end) - x, 1.0)
        tip = _text(f"{s.speaker} {s.start:.2f}–{s.end:.2f} s: {s.text}")
        canvas.add(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{LANE_HEIGHT:g}" '
            f'fill="{COLOURS[s.speaker]}" rx="3"><title>{tip}</title></rect>'
        )
        chars = int(width / 6.5)
        if chars >= 4 and s.text:
            label = _text(s.text, chars)
            canvas.add(f'<text x="{x + 3:.1f}" y="{y + 19:.1f}" fill="#fff">{label}</text>')


def _overlaps_and_silences(canvas: _Canvas, segments: tuple[Segment, ...]) -> None:
    for start, end in overlaps(segments):
        x = canvas.x(start)
        canvas.add(
            f'<rect x="{x:.1f}" y="25" width="{max(canvas.x(end) - x, 1.0):.1f}" height="90" '
            f'fill="#e53935" fill-opacity="0.3"><title>overlap {end - start:.2f} s</title></rect>'
        )
    for start, end in silences(segments, SILENCE_LABEL_SECONDS):
        middle = (canvas.x(start) + canvas.x(end)) / 2
        canvas.add(
            f'<text x="{middle:.1f}" y="72" text-anchor="middle" fill="#757575">'
            f"silence {end - start:.1f} s</text>"
        )


def _marks(canvas: _Canvas, marks: tuple[Mark, ...]) -> None:
    for m in marks:
        x = canvas.x(m.at)
        note = _text(m.note, 80)
        if m.kind == "first_audio" and m.value is not None:
            start = canvas.x(m.at - m.value)
            canvas.add(
                f'<path d="M{start:.1f},114 v6 H{x:.1f} v-6" fill="none" stroke="#000">'
                f"<title>first audio {m.value:.2f} s after the caller stopped {note}</title></path>"
            )
            middle = (start + x) / 2
            canvas.add(
                f'<text x="{middle:.1f}" y="150" text-anchor="middle">{m.value:.2f} s</text>'
            )
            continue
        colour = MARK_COLOURS.get(m.kind, "#000")
        value = "" if m.value is None else f" (probability {m.value:.2f})"
        dash = ' stroke-dasharray="4 3"' if m.kind == "false_interruption" else ""
        top = 22 if m.kind != "eot" else LANE_Y["caller"] - 4
        bottom = 118 if m.kind != "eot" else LANE_Y["caller"] + LANE_HEIGHT + 4
        canvas.add(
            f'<line x1="{x:.1f}" y1="{top:g}" x2="{x:.1f}" y2="{bottom:g}" stroke="{colour}" '
            f'stroke-width="2"{dash}><title>{MARK_NAMES[m.kind]} at {m.at:.2f} s'
            f"{value} {note}</title></line>"
        )


def _legend(canvas: _Canvas, dropped: int) -> None:
    items = [
        ("caller", COLOURS["caller"]),
        ("agent", COLOURS["agent"]),
        ("overlap", "#e53935"),
        ("interruption", MARK_COLOURS["interruption"]),
        ("false interruption", MARK_COLOURS["false_interruption"]),
        ("end of turn", MARK_COLOURS["eot"]),
    ]
    x = LEFT
    for name, colour in items:
        canvas.add(f'<rect x="{x:.1f}" y="170" width="10" height="10" fill="{colour}"/>')
        canvas.add(f'<text x="{x + 14:.1f}" y="179">{name}</text>')
        x += 30 + 6.5 * len(name)
    canvas.add(f'<text x="{x:.1f}" y="179">bracket: first-audio latency</text>')
    if dropped:
        right = WIDTH - RIGHT
        canvas.add(
            f'<text x="{right:.1f}" y="14" text-anchor="end">{dropped} more not drawn</text>'
        )


def timeline_svg(timeline: Timeline) -> str:
    """The timeline as a standalone SVG document (at most ~150 KB whatever the call)."""
    segments = tuple(sorted(timeline.segments, key=lambda s: s.start)[:MAX_SEGMENTS])
    marks = tuple(sorted(timeline.marks, key=lambda m: m.at)[:MAX_MARKS])
    dropped = len(timeline.segments) - len(segments) + len(timeline.marks) - len(marks)
    last = max([s.end for s in segments] + [m.at for m in marks] + [0.0])
    canvas = _Canvas(max(timeline.duration, last))
    _axis(canvas)
    _segments(canvas, segments)
    _overlaps_and_silences(canvas, segments)  # over the speech: an overlap is seen in both lanes
    _marks(canvas, marks)
    _legend(canvas, dropped)
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH:g}" height="{HEIGHT:g}" '
        f'viewBox="0 0 {WIDTH:g} {HEIGHT:g}" font-family="sans-serif" font-size="11">'
        f"<title>call timeline, {canvas.duration:.1f} s</title>"
        f'<rect width="100%" height="100%" fill="#fff"/>'
    )
    return "\n".join([head, *canvas.parts, "</svg>"]) + "\n"
