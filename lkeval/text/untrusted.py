"""Untrusted text made inert for each place it is shown: a terminal line, Markdown, a code block,
and a log the GitHub runner reads workflow commands from.

Labels come from a scenario file (a PR can change it), transcripts and tool outputs from the
agent, reasons from an LLM, and all of them from a results file in the fork-safe recipe's
privileged job. None of it may steer what displays it:

* a terminal or an Actions log gets no raw control characters (ESC starts terminal escape
  sequences, BEL rings, a CR overwrites the line): they are *shown*, as ``\\x1b``;
* Markdown (the PR comment, the job summary, the report) gets no live syntax: no links, images,
  HTML or ``@`` mentions, which would ping people from the bot's account;
* the runner reads no workflow command from it (below);
* lengths are bounded, so one huge label cannot push every other scenario out of a report.

Every cut here masks first (:func:`lkeval.text.masking.clip`): a cut secret is not
recognised afterwards.

Workflow commands: the escaping rules are the runner's (the same as ``@actions/core``): ``%``,
CR and LF in a command's message; additionally ``:`` and ``,`` in its properties (an unescaped
comma in a file name would otherwise start a new property). The runner reads commands from
stdout *and* stderr, on every line (a bare CR ends one too): a ``::name::`` form where the line
starts with ``::`` after leading whitespace, and the old ``##[name]`` form *anywhere* in the
line. So text from a scenario file, an agent, an LLM or a results file is printed either as one
:func:`inert_line` or inside an :func:`inert` block. Writing the commands (annotations, groups,
the summary, outputs) is :mod:`lkeval.publish.github.workflow`'s job.
"""

from __future__ import annotations

import html
import re
import shlex
import uuid
from collections.abc import Sequence

from lkeval.text.masking import clip, markdown_entities, process_masker

#: Longest label shown anywhere (a table cell, a log line, a JUnit name).
LABEL_CHARS = 200
#: Longest single reason shown anywhere.
REASON_CHARS = 2000

_SPACE = re.compile(r"\s+")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# C0 and C1 controls and DEL, the Unicode line and paragraph separators (a line break to
# every reader that follows Unicode, str.splitlines included), plus the bidirectional overrides
# that reorder what a reader sees ("Trojan Source"). Tab and LF stay where lines are allowed.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_ALL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
#: What ends a line besides CR and LF (``str.splitlines``'s list): shown escaped in a command.
_OTHER_BREAKS = re.compile("[\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_MENTION = re.compile(r"@(?=[A-Za-z0-9_])")
_BACKTICKS = re.compile(r"`+")
ZERO_WIDTH_SPACE = "\u200b"


def _escape_char(match: re.Match[str]) -> str:
    char = match.group(0)
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def strip_ansi(text: str) -> str:
    """``text`` without ANSI colour sequences (agent logs are coloured; a file viewer is not
    a terminal)."""
    return _ANSI.sub("", text)


def visible(text: str, lines: bool = False) -> str:
    """Control characters shown as escapes (``\\x1b``), so none reaches a terminal.

    With ``lines``, LF and tab stay (and CRLF becomes LF); otherwise they are escaped too.
    """
    if lines:
        return _CONTROL.sub(_escape_char, text.replace("\r\n", "\n"))
    return _CONTROL_ALL.sub(_escape_char, text)


def terminal_text(text: str, limit: int = REASON_CHARS) -> str:
    """One line for a terminal or a log: whitespace collapsed, controls shown, masked, cut."""
    return clip(visible(_SPACE.sub(" ", text).strip()), limit)


def label(text: str) -> str:
    """A scenario label for any one-line display, bounded to :data:`LABEL_CHARS`."""
    return terminal_text(text, LABEL_CHARS)


def md_text(text: str, limit: int | None = None) -> str:
    """Text for Markdown or HTML context that renders as itself and nothing more.

    ``<>&`` become entities (no HTML), Markdown punctuation becomes numeric entities (no
    links, images, emphasis or code spans; entities read the same in HTML blocks such as
    ``<summary>``), ``@name`` gets a zero-width space after the ``@`` as other bots do (no
    mention, no e-mail link), and ``://`` / ``www.`` are broken so nothing is autolinked.
    """
    shown = visible(text, lines=True)
    if limit is not None:
        shown = clip(shown, limit)
    escaped = markdown_entities(html.escape(shown, quote=False))
    escaped = _MENTION.sub("@" + ZERO_WIDTH_SPACE, escaped)
    return escaped.replace("://", "&#58;//").replace("www.", "www&#46;")


def md_cell(text: str, limit: int = LABEL_CHARS) -> str:
    """A Markdown table cell: one line, bounded, inert (``|`` cannot split the cell)."""
    return md_text(_SPACE.sub(" ", text).strip(), limit)


def md_code_block(text: str, info: str = "") -> str:
    """``text`` in a fenced code block whose fence is longer than any backtick run inside,
    so nothing in it can close the block early; inside, Markdown and mentions are inert."""
    shown = visible(text, lines=True)
    longest = max((len(run) for run in _BACKTICKS.findall(shown)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{shown}\n{fence}"


# GitHub Actions workflow commands, and untrusted lines the runner cannot read as one.


#: The old command form, which the runner reads anywhere in a line, and its log viewer too
#: (``::group::T`` is written to the log as ``##[group]T``).
LEGACY_PREFIX = "##["


def without_legacy(text: str) -> str:
    """``text`` with every ``##[`` broken by a zero-width space (it reads the same)."""
    return text.replace(LEGACY_PREFIX, "##" + ZERO_WIDTH_SPACE + "[")


def _escape(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_data(value: str) -> str:
    """Escape a workflow command's message: ``%``, CR and LF as the runner expects, every other
    line break shown escaped (``\\u2028``), and no ``##[`` (a label in a ``::group::`` title
    or an annotation is untrusted text)."""
    return without_legacy(_OTHER_BREAKS.sub(_escape_char, _escape(value)))


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


def one_line(text: str) -> str:
    """Text that may hold anything (a path, a model name, a title from an input) as one log
    line, whole: every control character and line break shown escaped (``\\x0a``), ``##[``
    broken, and a zero-width space before a leading ``::``. Unlike :func:`inert_line` nothing
    is collapsed or cut, so a path or a command line reads exactly; the caller masks."""
    line = without_legacy(visible(text))
    return ZERO_WIDTH_SPACE + line if line.lstrip().startswith("::") else line


def shown_command(argv: Sequence[str]) -> str:
    """A command line as one :func:`one_line`, each argument quoted as a shell would need
    (``lkeval run --title 'a\\x0a::error::x'``)."""
    return one_line(shlex.join(visible(arg) for arg in argv))


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
