"""GitHub Actions workflow commands and files: annotations, groups, masks, outputs, summary.

These are plain text conventions of the runner, so this module only formats and appends; it
does no network I/O. The escaping rules are the runner's (the same as ``@actions/core``):
``%``, CR and LF in a command's message; additionally ``:`` and ``,`` in its properties —
an unescaped comma in a file name would otherwise start a new property.

The runner reads commands from stdout *and* stderr, on every line (a bare CR ends one too):
a ``::name::`` form where the line starts with ``::`` after leading whitespace, and the old
``##[name]`` form *anywhere* in the line. So text from a scenario file, an agent, an LLM or a
results file is printed either as one :func:`inert_line` or inside an :func:`inert` block.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from lkeval.results.masking import Masker, clip
from lkeval.results.model import RunResults, ScenarioResult
from lkeval.results.untrusted import REASON_CHARS, ZERO_WIDTH_SPACE, terminal_text
from lkeval.results.wording import failure_reasons, outcome_line, plain

#: GitHub refuses a job summary over 1 MiB per step.
MAX_SUMMARY_BYTES = 1024 * 1024
#: GitHub shows at most 10 error annotations per step; more are dropped silently.
MAX_ERROR_ANNOTATIONS = 10
ANNOTATION_MESSAGE_CHARS = 2000


def escape_data(value: str) -> str:
    """Escape a workflow command's message."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """Escape a workflow command's property value."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def command(name: str, message: str = "", **properties: str | int | None) -> str:
    """One workflow command line, e.g. ``::error file=a.yaml,line=3,title=T::message``."""
    props = ",".join(
        f"{key}={escape_property(str(value))}"
        for key, value in properties.items()
        if value is not None and value != ""
    )
    return f"::{name}{' ' + props if props else ''}::{escape_data(message)}"


def warning(message: str) -> str:
    """A ``::warning::`` line."""
    return command("warning", message)


def add_mask_commands(masker: Masker) -> list[str]:
    """``::add-mask::`` lines for every secret the masker knows, so the runner hides them too."""
    return [command("add-mask", secret) for secret in masker.secrets]


def inert_line(text: str, limit: int = REASON_CHARS) -> str:
    """One printable line carrying untrusted text that the runner cannot read as a command.

    Whitespace (CR and LF included) is collapsed, control characters are shown escaped, the
    text is masked and bounded; a line that would start with ``::`` gets a zero-width space in
    front, and the legacy ``##[`` prefix is broken wherever it appears.
    """
    line = terminal_text(text, limit).replace("##[", "##" + ZERO_WIDTH_SPACE + "[")
    return ZERO_WIDTH_SPACE + line if line.lstrip().startswith("::") else line


def inert_lines(text: str) -> str:
    """Each line of ``text`` as an :func:`inert_line`; a workflow command of lk-eval's own
    (already escaped, one line) is kept as it is."""
    if text.startswith("::") and "\n" not in text and "\r" not in text:
        return text
    lines = text.splitlines()
    return "\n".join(line[: len(line) - len(line.lstrip(" "))] + inert_line(line) for line in lines)


def inert(lines: list[str]) -> list[str]:
    """Wrap untrusted lines so the runner cannot read any of them as a workflow command.

    The runner parses a command on any line that *starts* with ``::`` after leading spaces,
    and a transcript is text the agent (or a prompt injection) chose; ``::stop-commands::``
    with a random token switches parsing off until the token is echoed back.
    """
    if not lines:
        return []
    token = f"lkeval-{uuid.uuid4().hex}"
    return [f"::stop-commands::{token}", *lines, f"::{token}::"]


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
