"""Whether the simulated caller played its part: cheap checks on its lines, no LLM call.

A conversation whose caller did not play the scenario says nothing about the agent, so it is
not judged: :func:`role_break` names the first way the caller broke role, and the attempt is an
``error`` ("the simulated caller broke role: ..."). Seen with a 1.5B caller on llama.cpp: its
first line was the agent's, then it said one line five times and never ended the call. The
rules (docs/judging.md), over the simulated caller's messages only (scripted turns are the
scenario author's):

- **It spoke as the agent**: a line labelled as the agent's (``Agent:``, ``Assistant:``); a
  service desk's line (``How can I help you?``, ``Thank you for calling``, ``Is there anything
  else I can help you with?``); or the agent's last line of at least six words said back.
- **It repeated itself**: the same line of five words or more in :data:`REPEATS` caller turns
  in a row while the agent's lines between them differed (short answers such as "Yes." repeat
  in good conversations) (when the agent repeats itself too, the loop is the
  agent's to answer for, and the judge sees it).
- **It ignored its instructions for the whole call**: not one of its lines plays them. Every
  line echoes the agent or is JSON; or, with two lines or more and instructions with at least
  three content words, no line shares a single content word with them (words compared by
  their first four letters, common words left out).

Lesser slips in a call that was played (one short echo, one JSON line) are a flag on a passing
``caller`` verdict (:func:`caller_flag`), shown with the result.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from difflib import SequenceMatcher

from lkeval.llm.textcalls import looks_like_json
from lkeval.results.model import TranscriptItem, Verdict

__all__ = [
    "REPEATS",
    "REPEAT_WORDS",
    "caller_flag",
    "caller_lines",
    "is_agent_line",
    "role_break",
]

REPEATS = 3
"""The same caller line this many turns in a row is a caller stuck in a loop."""
_ECHO_WORDS = 6
REPEAT_WORDS = 5
_AGENT_LABEL = re.compile(r"^\s*\W*(?:agent|assistant|ai assistant|ai|bot)\s*:", re.IGNORECASE)
_AGENT_LINES = re.compile(
    r"\bhow (?:can|may|could) i (?:help|assist)\b"
    r"|\bthanks? (?:you )?for calling\b"
    r"|\bwhat can i do for you\b"
    r"|\b(?:is there )?anything else i can (?:help|do|assist)\b",
    re.IGNORECASE,
)
_COMMON_WORDS = (
    "about after again also always another anything because been before being both call "
    "caller calls could does doing done each even ever every from going good goodbye have "
    "having hello here into just keep know like make many more most much must need only other "
    "over please really said same says should some such sure tell than thank thanks that "
    "their them then there these they thing think this those through until very want wants "
    "what when where which while will with would your yours agent okay"
)
_COMMON = frozenset(_COMMON_WORDS.split())


def words(text: str) -> str:
    """``text`` lower-cased, punctuation dropped, whitespace collapsed."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def is_echo(said: str, heard: str) -> bool:
    """The caller repeated what the agent just said (all of it, or a long part of it)."""
    a, b = words(said), words(heard)
    if not a or not b:
        return False
    return a == b or (len(a) >= 12 and a in b) or SequenceMatcher(None, a, b).ratio() >= 0.9


def caller_lines(transcript: Sequence[TranscriptItem], first_turn: int) -> list[tuple[str, str]]:
    """(what the agent said since the caller's last line, the caller's line) for each of the
    simulated caller's messages (turn ``first_turn`` on)."""
    heard, lines = "", []
    for item in transcript:
        if item.kind != "message" or not item.text.strip():
            continue
        if item.role == "assistant":
            heard = f"{heard} {item.text}".strip()
        elif item.role == "user":
            if item.turn >= first_turn:
                lines.append((heard, item.text))
            heard = ""
    return lines


def is_agent_line(said: str) -> bool:
    """A line labelled as the agent's, or a service desk's line."""
    return bool(_AGENT_LABEL.match(said) or _AGENT_LINES.search(said))


def _spoke_as_agent(lines: list[tuple[str, str]]) -> str | None:
    for n, (heard, said) in enumerate(lines, 1):
        quoted = " ".join(said.split())[:80]
        if is_agent_line(said):
            return f"its message {n} of {len(lines)} is the agent's line: {quoted!r}"
        if len(words(said).split()) >= _ECHO_WORDS and is_echo(said, heard):
            return f"its message {n} of {len(lines)} says the agent's line back: {quoted!r}"
    return None


def _repeated(lines: list[tuple[str, str]]) -> str | None:
    for end in range(REPEATS, len(lines) + 1):
        run = lines[end - REPEATS : end]
        said = {words(s) for _, s in run}
        heard = {words(h) for h, _ in run}
        line = next(iter(said))
        if len(said) == 1 and len(line.split()) >= REPEAT_WORDS and len(heard) > 1:
            quoted = " ".join(run[0][1].split())[:80]
            return f"it said {quoted!r} {REPEATS} times in a row while the agent moved on"
    return None


def _content(text: str) -> set[str]:
    found = re.findall(r"[^\W_]+", text.lower())
    return {w[:4] for w in found if (len(w) >= 4 or w.isdigit()) and w not in _COMMON}


def _ignored(lines: list[tuple[str, str]], instructions: str) -> str | None:
    played = [s for h, s in lines if not looks_like_json(s) and not is_echo(s, h)]
    if lines and not played:
        return f"none of its {len(lines)} message(s) played its instructions (echoes or JSON)"
    wanted = _content(instructions)
    if len(lines) >= 2 and len(wanted) >= 3 and not any(_content(s) & wanted for s in played):
        return (
            f"none of its {len(lines)} messages shares a word with its instructions "
            "(it ignored them for the whole call)"
        )
    return None


def role_break(
    transcript: Sequence[TranscriptItem], first_turn: int, instructions: str
) -> str | None:
    """How the simulated caller broke role (the rules are the module's), or None."""
    lines = caller_lines(transcript, first_turn)
    return _spoke_as_agent(lines) or _repeated(lines) or _ignored(lines, instructions)


def caller_flag(transcript: Sequence[TranscriptItem], first_turn: int) -> Verdict | None:
    """A passing ``caller`` verdict flagging slips (echoes of the agent, JSON) in a call the
    caller did play; None when there were none."""
    lines = caller_lines(transcript, first_turn)
    bad = {"echoed the agent": 0, "sent JSON": 0}
    for heard, said in lines:
        if looks_like_json(said):
            bad["sent JSON"] += 1
        elif is_echo(said, heard):
            bad["echoed the agent"] += 1
    found = [f"{what} in {n} of {len(lines)} message(s)" for what, n in bad.items() if n]
    if not found:
        return None
    return Verdict("caller", "pass", f"flag: the simulated caller {'; '.join(found)}")
