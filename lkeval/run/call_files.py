"""An audio attempt's call for a person: the stereo WAV and the SVG timeline, beside its log.

Both are built from what lk-eval's microphone and speaker saw on the wire's clock (seconds from
the moment the microphone opened): each caller line where its first sample went out, each agent
reply where it started playing, cut where the agent stopped it. The timeline marks each turn's
first audio (with the caller's wait), each interruption and false interruption.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from lkeval.audio import WIRE_RATE
from lkeval.audio.artifacts import write_call_files
from lkeval.audio.timeline import Mark, Segment, Timeline
from lkeval.errors import OutputError
from lkeval.results.model import AudioCallRecord, TranscriptItem, TurnMetrics
from lkeval.run.audio_line import SpokenLine
from lkeval.run.audio_turns import AudioCall

_SAMPLE = 2  # bytes per sample (mono s16le)


def timeline_of(
    call: AudioCall, transcript: list[TranscriptItem], turns: list[TurnMetrics]
) -> Timeline:
    """Who spoke when, and the marks worth seeing, from the call's start."""
    t0, ended = call.started, call.started
    said = [i.text for i in transcript if i.kind == "message" and i.role == "assistant"]
    segments: list[Segment] = []
    for line in call.mic.lines:
        if line.started is not None and line.stopped is not None:
            segments.append(Segment("caller", line.started - t0, line.stopped - t0, line.text))
            ended = max(ended, line.stopped)
    marks: list[Mark] = []
    for index, reply in enumerate(call.speaker.replies):
        text = said[index] if index < len(said) else ""
        segments.append(Segment("agent", reply.starts - t0, reply.ends - t0, text))
        ended = max(ended, reply.ends)
        if reply.cleared is not None:
            marks.append(Mark("interruption", reply.cleared - t0, note="the agent stopped"))
    for at in call.heard.false_interruptions:
        marks.append(Mark("false_interruption", at - t0, note="false interruption"))
    for line, turn in zip(_spoken(call), [t for t in turns if t.mode == "audio"], strict=False):
        if turn.first_audio_ms is not None and line.stopped is not None:
            at = line.stopped - t0 + turn.first_audio_ms / 1000
            marks.append(Mark("first_audio", at, turn.first_audio_ms / 1000))
    return Timeline(tuple(segments), tuple(marks), max(0.0, ended - t0))


def _spoken(call: AudioCall) -> list[SpokenLine]:
    return [line for line in call.mic.lines if line.stopped is not None]


def tracks(call: AudioCall) -> tuple[bytes, bytes]:
    """The caller's and the agent's audio as two mono tracks on the call's clock."""
    t0 = call.started
    caller, agent = bytearray(), bytearray()
    for line in call.mic.lines:
        if line.started is not None:
            _place(caller, line.started - t0, line.pcm)
    for reply in call.speaker.replies:
        played = int((reply.ends - reply.starts) * WIRE_RATE) * _SAMPLE
        _place(agent, reply.starts - t0, bytes(reply.pcm[:played]))
    return bytes(caller), bytes(agent)


def _place(track: bytearray, at: float, pcm: bytes) -> None:
    offset = max(0, int(at * WIRE_RATE)) * _SAMPLE
    if len(track) < offset:
        track.extend(bytes(offset - len(track)))
    end = offset + len(pcm)
    if len(track) < end:
        track.extend(bytes(end - len(track)))
    track[offset:end] = pcm


def write_call(
    call: AudioCall,
    record: AudioCallRecord,
    folder: Path,
    scenario_id: str,
    attempt: int,
    transcript: list[TranscriptItem],
    turns: list[TurnMetrics],
) -> tuple[AudioCallRecord, str]:
    """Write the call's WAV and SVG into ``folder``: (the record with their paths, a note when
    they could not be written)."""
    try:
        caller, agent = tracks(call)
        files = write_call_files(
            folder, scenario_id, attempt, timeline_of(call, transcript, turns), caller, agent
        )
    except (OutputError, OSError, ValueError) as exc:
        return record, f"the call's recording could not be written: {exc}"
    return dataclasses.replace(
        record, recording=str(files.recording.path), timeline=str(files.timeline)
    ), ""
