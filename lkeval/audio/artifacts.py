"""One audio attempt's files for a person: ``<stem>.wav`` (the call) and ``<stem>.svg`` (its
timeline), side by side in the run's output directory.

The stem comes from the scenario's id, which a scenario file may spell any way: it is reduced to
safe characters (no path separators, no leading dot) and suffixed with a short hash of the
original id, so two ids that reduce alike never overwrite each other's files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from lkeval.audio import WIRE_RATE
from lkeval.audio.recording import Recording, write_wav
from lkeval.audio.timeline import Timeline, timeline_svg
from lkeval.errors import OutputError
from lkeval.text.file_names import call_file_stem


@dataclass(frozen=True)
class CallFiles:
    """Where one attempt's recording and timeline were written."""

    recording: Recording
    timeline: Path


def write_call_files(
    directory: str | os.PathLike[str],
    scenario_id: str,
    attempt: int,
    timeline: Timeline,
    pcm_caller: bytes,
    pcm_agent: bytes,
    rate: int = WIRE_RATE,
) -> CallFiles:
    """Write the attempt's WAV and SVG into ``directory``; :class:`OutputError` names a path."""
    folder = Path(directory)
    stem = call_file_stem(scenario_id, attempt)
    recording = write_wav(folder / f"{stem}.wav", pcm_caller, pcm_agent, rate)
    svg_path = folder / f"{stem}.svg"
    partial = svg_path.with_name(svg_path.name + ".partial")
    try:
        partial.write_text(timeline_svg(timeline), encoding="utf-8")
        partial.replace(svg_path)
    except OSError as exc:
        raise OutputError(str(svg_path), exc.strerror or type(exc).__name__) from None
    return CallFiles(recording, svg_path)
