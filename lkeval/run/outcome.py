"""How an attempt's facts become its status: the rules that keep a broken run from passing.

Kept apart from the attempt (which talks to the agent) so the rules are plain functions over
data, tested without booting anything:

* A conversation that did not happen is never judged: the session ended before the caller's
  first turn, or the agent never produced an assistant message. That is an ``error`` carrying
  the agent's own error text, unless the scenario's scripted expectations ask for exactly
  that (they all passed on such a transcript).
* A known failure stays a failure: a scripted expectation that failed keeps the attempt
  ``failed`` whatever else went wrong afterwards (the judge down, ``on_simulation_end`` raising).
* Otherwise anything that kept a verdict from being reached (the judge failed, the agent's own
  verdict could not be asked or raised) makes the attempt ``error``, with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from lkeval.results.model import ExpectationResult, Status, TranscriptItem, Verdict

_LOG_PREFIX = re.compile(r"^\d\d:\d\d:\d\d(?:\.\d+)?\s+(?:ERROR|CRITICAL)\s+[\w.]+\s+")
_EXCEPTION_LINE = re.compile(r"^[\w.]*(Error|Exception)\b:")
_ERROR_REPR = re.compile(r"error=(\w+)\('((?:[^'\\]|\\.)*)'")


def has_assistant_message(transcript: Sequence[TranscriptItem]) -> bool:
    """Did the agent say anything at all? A message of only whitespace is not speech: an
    agent whose LLM answers ``" "`` or ``"\\n"`` said nothing a caller could hear."""
    return any(i.kind == "message" and i.role == "assistant" and i.text.strip() for i in transcript)


def caller_turns(transcript: Sequence[TranscriptItem]) -> int:
    """How many caller turns were played."""
    return len({i.turn for i in transcript if i.kind == "message" and i.role == "user"})


def scripted_failures(expectations: Sequence[ExpectationResult]) -> list[ExpectationResult]:
    """The scripted expectations that failed."""
    return [e for e in expectations if not e.passed]


def describe_failures(failed: Sequence[ExpectationResult]) -> str:
    """One line per failed expectation, joined: ``turn 1: message contains 'x': ...``."""
    return "; ".join(f"turn {e.turn}: {e.description}: {e.reason}" for e in failed)


def asked_for_silence(expectations: Sequence[ExpectationResult], unplayed_turns: int) -> bool:
    """Scripted expectations that all held on a conversation without an assistant message
    asked for exactly that (an agent meant to stay quiet)."""
    return bool(expectations) and unplayed_turns == 0 and not scripted_failures(expectations)


def agent_error_text(errors: Sequence[str], log_tail: Sequence[str]) -> str:
    """The agent's own words for what went wrong: the log's "unrecoverable error" line, else
    its ``error`` events, else the last ERROR (or exception) line of its log; "" when it said
    nothing."""
    for line in reversed(log_tail):
        if _LOG_PREFIX.match(line) and "unrecoverable error" in line:
            return _LOG_PREFIX.sub("", line).strip()
    unique = list(dict.fromkeys(_short_error(e) for e in errors if e.strip()))
    if unique:
        more = f" (+{len(unique) - 2} more)" if len(unique) > 2 else ""
        return "; ".join(unique[-2:]) + more
    for line in reversed(log_tail):
        if _LOG_PREFIX.match(line):
            return _LOG_PREFIX.sub("", line).strip()
    for line in reversed(log_tail):
        if _EXCEPTION_LINE.match(line):
            return line.strip()
    return ""


def _short_error(message: str) -> str:
    """LiveKit's error events carry a repr (``type='llm_error' ... error=APIConnectionError(
    'Connection error.', ...)``): keep the exception's name and message."""
    found = _ERROR_REPR.search(message)
    return f"{found.group(1)}: {found.group(2)}" if found else message.strip()


def with_agent_text(reason: str, agent_text: str) -> str:
    """``reason: the agent's error`` (the reason alone when the agent said nothing new)."""
    if not agent_text or agent_text in reason:
        return reason
    return f"{reason}: {agent_text}"


def no_conversation(
    transcript: Sequence[TranscriptItem],
    expectations: Sequence[ExpectationResult],
    unplayed_turns: int,
    end_reason: str,
) -> str:
    """Why this was not a conversation worth judging ("" when it was one)."""
    if has_assistant_message(transcript):
        return ""
    if asked_for_silence(expectations, unplayed_turns):
        return ""
    turns = caller_turns(transcript)
    if turns == 0:
        why = end_reason or "no caller turn was played"
        return f"no conversation happened ({why}): the agent never produced an assistant message"
    return f"the agent never produced an assistant message in {turns} caller turn(s)" + (
        f" ({end_reason})" if end_reason else ""
    )


@dataclass(frozen=True)
class Decision:
    """An attempt's status and the reason shown everywhere (console, Markdown, JUnit)."""

    status: Status
    reason: str


def decide(
    verdicts: Sequence[Verdict],
    verdict_ok: bool,
    verdict_reason: str,
    expectations: Sequence[ExpectationResult],
    faults: Sequence[str],
) -> Decision:
    """Combine verdicts with the faults that kept a verdict from being reached.

    ``verdict_ok``/``verdict_reason`` are the verdicts' combination (judge, scripted, the
    agent's veto); ``faults`` are e.g. "judge failed: ..." or "on_simulation_end raised: ...".
    """
    failed = scripted_failures(expectations)
    fault_text = "; ".join(f for f in faults if f)
    if failed:
        reason = verdict_reason or describe_failures(failed)
        return Decision("failed", "; ".join(x for x in (reason, fault_text) if x))
    if fault_text:
        return Decision("error", "; ".join(x for x in (fault_text, verdict_reason) if x))
    if not verdicts:
        return Decision(
            "skipped", "nothing to check: no scripted expectations and no judge configured"
        )
    if verdict_ok:
        return Decision("passed", "")
    return Decision("failed", verdict_reason)
