"""Untrusted text made inert for each place it is shown: a terminal line, Markdown, a code block.

Labels come from a scenario file (a PR can change it), transcripts and tool outputs from the
agent, reasons from an LLM, and all of them from a results file in the fork-safe recipe's
privileged job. None of it may steer what displays it:

* a terminal or an Actions log gets no raw control characters (ESC starts terminal escape
  sequences, BEL rings, a CR overwrites the line): they are *shown*, as ``\\x1b``;
* Markdown (the PR comment, the job summary, the report) gets no live syntax: no links, images,
  HTML or ``@`` mentions, which would ping people from the bot's account;
* lengths are bounded, so one huge label cannot push every other scenario out of a report.

Every cut here masks first (:func:`lkeval.text.masking.clip`): a cut secret is not
recognised afterwards. Workflow-command inertness is in :mod:`lkeval.publish.github.workflow`.
"""

from __future__ import annotations

import html
import re

from lkeval.text.masking import clip, markdown_entities

#: Longest label shown anywhere (a table cell, a log line, a JUnit name).
LABEL_CHARS = 200
#: Longest single reason shown anywhere.
REASON_CHARS = 2000

_SPACE = re.compile(r"\s+")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# C0 and C1 controls and DEL, plus the bidirectional overrides that reorder what a reader sees
# ("Trojan Source"). Tab and LF stay where lines are allowed.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROL_ALL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
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
