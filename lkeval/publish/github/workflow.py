"""GitHub Actions workflow commands and files: annotations, groups, masks, outputs, summary.

These are plain text conventions of the runner, so this module only formats and appends; it
does no network I/O. The commands themselves, their escaping and untrusted text made inert
are :mod:`lkeval.text.untrusted`.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from lkeval.results.model import RunResults, ScenarioResult
from lkeval.results.wording import failure_reasons, outcome_line, plain
from lkeval.text.masking import clip
from lkeval.text.untrusted import command, terminal_text

#: GitHub refuses a job summary over 1 MiB per step.
MAX_SUMMARY_BYTES = 1024 * 1024
#: GitHub shows at most 10 error annotations per step; more are dropped silently.
MAX_ERROR_ANNOTATIONS = 10
ANNOTATION_MESSAGE_CHARS = 2000


@contextmanager
def group(stream: TextIO, title: str) -> Iterator[None]:
    """Fold what is written inside into one collapsible log group."""
    stream.write(command("group", title) + "\n")
    try:
        yield
    finally:
        stream.write("::endgroup::\n")


def annotation_path(file: str, workspace: str | None) -> str:
    """The scenario file relative to the workspace, the form GitHub matches to the PR diff."""
    if not workspace:
        return file
    # Scenario paths are relative to the working directory, which an Action may set below
    # the workspace (working-directory: agent/): resolve before making it workspace-relative.
    try:
        relative = os.path.relpath(os.path.abspath(file), os.path.abspath(workspace))
    except ValueError:
        return file
    return file if relative.startswith("..") else relative


def annotation_scenarios(results: RunResults) -> list[ScenarioResult]:
    """The scenarios that deserve an error annotation: counted failures and errors."""
    return [s for s in results.scenarios if s.status in ("failed", "error") and not s.quarantined]


def error_annotations(
    results: RunResults, workspace: str | None = None, limit: int = MAX_ERROR_ANNOTATIONS
) -> tuple[list[str], int]:
    """``::error`` lines for failing scenarios, at most ``limit``, and how many were left out."""
    failing = annotation_scenarios(results)
    lines = []
    for scenario in failing[:limit]:
        reasons = "\n".join(failure_reasons(scenario)) or outcome_line(scenario)
        message = clip(plain(reasons), ANNOTATION_MESSAGE_CHARS)
        status = "errored" if scenario.status == "error" else "failed"
        lines.append(
            command(
                "error",
                message,
                file=annotation_path(scenario.file, workspace),
                line=scenario.line or None,
                title=terminal_text(f"lk-eval: {scenario.label} {status}", 200),
            )
        )
    return lines, max(0, len(failing) - limit)


def summary_budget(path: str | Path, limit: int = MAX_SUMMARY_BYTES) -> int:
    """Bytes still free in this step's summary file (other steps' writers may share it)."""
    try:
        used = Path(path).stat().st_size
    except OSError:
        used = 0
    return max(0, limit - used)


def append_step_summary(path: str | Path, markdown: str) -> None:
    """Append Markdown to ``$GITHUB_STEP_SUMMARY``, cut to the space left (never over 1 MiB)."""
    room = summary_budget(path)
    data = markdown.encode()
    if len(data) > room:
        data = data[:room].decode(errors="ignore").encode()
    with open(path, "ab") as fh:
        fh.write(data)


def format_outputs(outputs: Mapping[str, str]) -> str:
    """``$GITHUB_OUTPUT`` text: ``name=value``, or a ``name<<DELIM`` block when multi-line."""
    chunks = []
    for name, value in outputs.items():
        if "\n" in value or "\r" in value:
            delimiter = f"ghadelimiter_{uuid.uuid4()}"
            while delimiter in value:
                delimiter = f"ghadelimiter_{uuid.uuid4()}"
            chunks.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
        else:
            chunks.append(f"{name}={value}\n")
    return "".join(chunks)


def write_outputs(path: str | Path, outputs: Mapping[str, str]) -> None:
    """Append step outputs to ``$GITHUB_OUTPUT``."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(format_outputs(outputs))
