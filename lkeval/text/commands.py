"""GitHub Actions workflow commands, and untrusted text the runner cannot read as one.

The escaping rules are the runner's (the same as ``@actions/core``): ``%``, CR and LF in a
command's message; additionally ``:`` and ``,`` in its properties — an unescaped comma in a
file name would otherwise start a new property.

The runner reads commands from stdout *and* stderr, on every line (a bare CR ends one too):
a ``::name::`` form where the line starts with ``::`` after leading whitespace, and the old
``##[name]`` form *anywhere* in the line. So text from a scenario file, an agent, an LLM or a
results file is printed either as one :func:`inert_line` or inside an :func:`inert` block.
Writing the commands (annotations, groups, the summary, outputs) is
:mod:`lkeval.publish.github.workflow`'s job.
"""

from __future__ import annotations

import uuid

from lkeval.text.masking import process_masker
from lkeval.text.untrusted import REASON_CHARS, ZERO_WIDTH_SPACE, terminal_text

#: The old command form, which the runner reads anywhere in a line, and its log viewer too
#: (``::group::T`` is written to the log as ``##[group]T``).
LEGACY_PREFIX = "##["


def without_legacy(text: str) -> str:
    """``text`` with every ``##[`` broken by a zero-width space (it reads the same)."""
    return text.replace(LEGACY_PREFIX, "##" + ZERO_WIDTH_SPACE + "[")


def _escape(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_data(value: str) -> str:
    """Escape a workflow command's message: ``%``, CR and LF as the runner expects, and no
    ``##[`` (a label in a ``::group::`` title or an annotation is untrusted text)."""
    return without_legacy(_escape(value))


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


def add_mask_commands() -> list[str]:
    """``::add-mask::`` lines for every secret this process knows, so the runner hides them too.

    The one command whose message is not cleared of ``##[``: the value must be the secret
    exactly, and the runner reads a line starting with a known ``::`` command as that command
    alone (it tries the legacy form only when that fails) and never shows it.
    """
    return [f"::add-mask::{_escape(secret)}" for secret in process_masker().secrets]


def inert_line(text: str, limit: int = REASON_CHARS) -> str:
    """One printable line carrying untrusted text that the runner cannot read as a command.

    Whitespace (CR and LF included) is collapsed, control characters are shown escaped, the
    text is masked and bounded; a line that would start with ``::`` gets a zero-width space in
    front, and the legacy ``##[`` prefix is broken wherever it appears.
    """
    line = without_legacy(terminal_text(text, limit))
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
    with a random token switches parsing off until the token is echoed back. ``##[`` is
    broken inside too: the log viewer reads that form from the stored log, commands or not.
    """
    if not lines:
        return []
    token = f"lkeval-{uuid.uuid4().hex}"
    return [f"::stop-commands::{token}", *map(without_legacy, lines), f"::{token}::"]
