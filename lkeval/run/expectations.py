"""Scripted-turn expectations checked against the events of one turn.

Semantics follow LiveKit's ``RunResult.expect``: expectations walk the turn's events in order
(``next_event``), ``skip`` moves past events, ``no_more_events`` asserts the end, and an
expectation written under ``contains:`` searches the whole turn without moving the cursor
(``contains_function_call`` and friends). User messages are not events of a turn.

``intent`` checks need an LLM; the caller passes an async ``IntentJudge`` (the judge module
provides it). Everything else is decided here, deterministically.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from lkeval.results.model import ExpectationResult, TranscriptItem, TurnMetrics
from lkeval.scenarios.model import Expectation, Turn
from lkeval.text.masking import clip

# (message text, intent) -> (passed, reason)
IntentJudge = Callable[[str, str], Awaitable[tuple[bool, str]]]


def turn_events(items: Sequence[TranscriptItem]) -> list[TranscriptItem]:
    """The events expectations look at: everything but the user's own messages."""
    return [i for i in items if not (i.kind == "message" and i.role == "user")]


def without_session_start(
    events: list[TranscriptItem], expect: Sequence[Expectation]
) -> list[TranscriptItem]:
    """Turn 0's events as a user writing checks on the greeting expects them.

    A real agent's turn 0 begins with the session-start handoff (none -> the first agent),
    then the greeting. LiveKit's ``RunResult`` has no greeting turn and never shows that
    handoff, so ``message: {contains: welcome}`` as the first check of turn 0 must see the
    greeting. The handoff stays an in-order event only for a turn 0 whose first in-order check
    is a ``handoff:``; ``contains: {handoff: ...}`` finds it either way.
    """
    if not events or events[0].kind != "agent_handoff" or events[0].old_agent:
        return events
    first = next((e for e in expect if not e.anywhere), None)
    if first is not None and first.kind == "handoff":
        return events
    return events[1:]


async def check_turn(
    turn_index: int,
    turn: Turn,
    items: Sequence[TranscriptItem],
    intent_judge: IntentJudge | None,
    metrics: TurnMetrics | None = None,
) -> list[ExpectationResult]:
    """Check every expectation of ``turn``; a failure does not stop the later checks.
    ``metrics`` (the turn's, audio turns) serve the ``heard:`` and ``barge_in:`` checks."""
    searchable = turn_events(items)  # ``contains:`` checks see every event, this one too
    events = without_session_start(searchable, turn.expect) if turn_index == 0 else searchable
    cursor = 0
    results: list[ExpectationResult] = []
    for index, exp in enumerate(turn.expect):
        passed, reason = True, ""
        if exp.kind == "skip":
            if cursor + exp.count > len(events):
                passed, reason = (
                    False,
                    (f"cannot skip {exp.count} event(s): only {len(events) - cursor} left"),
                )
            cursor = min(len(events), cursor + exp.count)
        elif exp.kind == "no_more_events":
            rest = events[cursor:]
            if rest:
                passed = False
                reason = "unexpected further events: " + "; ".join(describe_item(e) for e in rest)
        elif exp.kind in ("heard", "barge_in"):
            passed, reason = audio_check(exp, metrics)
        elif exp.anywhere:
            passed, reason = False, "no event of the turn matched"
            for event in searchable:
                ok, why = await match_event(exp, event, intent_judge)
                if ok:
                    passed, reason = True, ""
                    break
                if why and _same_kind(exp, event):
                    reason = why
        elif cursor >= len(events):
            passed, reason = False, "the turn had no further event"
        else:
            passed, reason = await match_event(exp, events[cursor], intent_judge)
            cursor += 1
        results.append(
            ExpectationResult(
                turn=turn_index,
                index=index,
                description=exp.describe(),
                passed=passed,
                reason=reason,
                line=exp.line,
            )
        )
    return results


def audio_check(exp: Expectation, metrics: TurnMetrics | None) -> tuple[bool, str]:
    """A ``heard:`` or ``barge_in:`` check on an audio turn's metrics: (passed, reason)."""
    if metrics is None or metrics.mode != "audio":
        return False, "not a spoken turn (audio mode): nothing was heard or cut into"
    if exp.kind == "barge_in":
        stopped = metrics.agent_stopped_ms
        if exp.yields is False:
            if stopped is None:
                return True, ""
            return False, f"false yield: the agent stopped {stopped / 1000:.2f}s into the line"
        if stopped is None:
            return False, "the agent did not stop speaking when the caller cut in"
        if exp.within_ms is not None and stopped > exp.within_ms:
            return False, f"the agent stopped only after {stopped / 1000:.2f}s"
        return True, ""
    heard = metrics.heard or ""
    missing = [c for c in exp.contains if c.lower() not in heard.lower()]
    if missing:
        return False, f"heard {clip(heard, 200)!r}: no {', '.join(repr(m) for m in missing)}"
    if exp.matches and not re.search(exp.matches, heard, re.IGNORECASE):
        return False, f"heard {clip(heard, 200)!r}: does not match /{exp.matches}/"
    if exp.max_wer is not None and (metrics.wer is None or metrics.wer > exp.max_wer):
        return False, f"heard {clip(heard, 200)!r}: word error rate {metrics.wer}"
    return True, ""


def _same_kind(exp: Expectation, event: TranscriptItem) -> bool:
    return _KIND_OF_EVENT.get(event.kind) == exp.kind


_KIND_OF_EVENT = {
    "message": "message",
    "function_call": "function_call",
    "function_call_output": "function_call_output",
    "agent_handoff": "handoff",
}


async def match_event(
    exp: Expectation, event: TranscriptItem, intent_judge: IntentJudge | None
) -> tuple[bool, str]:
    """Does ``event`` satisfy ``exp``? Returns (passed, reason when not)."""
    if not _same_kind(exp, event):
        return False, f"expected {exp.describe()}, got {describe_item(event)}"
    if exp.kind == "message":
        return await _match_message(exp, event, intent_judge)
    if exp.kind == "function_call":
        return _match_call(exp, event)
    if exp.kind == "function_call_output":
        return _match_output(exp, event)
    return _match_handoff(exp, event)


async def _match_message(
    exp: Expectation, event: TranscriptItem, intent_judge: IntentJudge | None
) -> tuple[bool, str]:
    if event.role != exp.role:
        return False, f"expected a {exp.role} message, got a {event.role} message"
    text = event.text
    for needle in exp.contains:
        if needle.lower() not in text.lower():
            return False, f"message does not contain {needle!r}: {_clip(text)!r}"
    if exp.matches and not re.search(exp.matches, text, re.IGNORECASE | re.DOTALL):
        return False, f"message does not match /{exp.matches}/: {_clip(text)!r}"
    if exp.intent:
        if intent_judge is None:
            return False, "intent checks need a judge model (--judge-model)"
        ok, why = await intent_judge(text, exp.intent)
        if not ok:
            return False, f"judged not to fulfil intent {exp.intent!r}: {why}"
    return True, ""


def _match_call(exp: Expectation, event: TranscriptItem) -> tuple[bool, str]:
    if exp.name and event.name != exp.name:
        return False, f"expected a call to {exp.name}, got {describe_item(event)}"
    if exp.arguments:
        try:
            actual = json.loads(event.arguments or "{}")
        except json.JSONDecodeError:
            return (
                False,
                f"{event.name} was called with arguments that are not JSON: {event.arguments}",
            )
        mismatch = partial_mismatch(exp.arguments, actual)
        if mismatch:
            return False, f"{event.name} called with {event.arguments}: {mismatch}"
    return True, ""


def _match_output(exp: Expectation, event: TranscriptItem) -> tuple[bool, str]:
    if exp.name and event.name != exp.name:
        return False, f"expected the output of {exp.name}, got {describe_item(event)}"
    output = event.output or ""
    if exp.is_error is not None and bool(event.is_error) != exp.is_error:
        state = "an error" if event.is_error else "not an error"
        return False, f"output of {event.name} is {state}: {_clip(output)!r}"
    if exp.output is not None and output.strip() != exp.output.strip():
        return False, f"output of {event.name} is {_clip(output)!r}, expected {exp.output!r}"
    if exp.output_contains is not None and exp.output_contains.lower() not in output.lower():
        return (
            False,
            f"output of {event.name} does not contain {exp.output_contains!r}: {_clip(output)!r}",
        )
    return True, ""


def _match_handoff(exp: Expectation, event: TranscriptItem) -> tuple[bool, str]:
    if exp.to and agent_key(exp.to) != agent_key(event.new_agent or ""):
        return False, f"expected a handoff to {exp.to}, got one to {event.new_agent}"
    return True, ""


def agent_key(name: str) -> str:
    """Compare agents by id: LiveKit derives an agent's id from its class name in snake case,
    so ``BookingAgent`` and ``booking_agent`` name the same agent."""
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", name.strip()).lower()
    return re.sub(r"_+", "_", snake)


def partial_mismatch(expected: Any, actual: Any, path: str = "") -> str:
    """Empty when ``expected`` is contained in ``actual`` (dicts by subset), else why not."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path or 'arguments'} is {actual!r}, expected an object"
        for key, value in expected.items():
            where = f"{path}.{key}" if path else key
            if key not in actual:
                return f"argument {where} is missing"
            mismatch = partial_mismatch(value, actual[key], where)
            if mismatch:
                return mismatch
        return ""
    if isinstance(expected, str) and isinstance(actual, str):
        return (
            ""
            if expected.strip().lower() == actual.strip().lower()
            else (f"argument {path} is {actual!r}, expected {expected!r}")
        )
    if expected != actual:
        return f"argument {path} is {actual!r}, expected {expected!r}"
    return ""


def describe_item(item: TranscriptItem) -> str:
    """One short line naming a transcript item, for failure reasons."""
    if item.kind == "message":
        return f"{item.role} message {_clip(item.text)!r}"
    if item.kind == "function_call":
        return f"call {item.name}({item.arguments})"
    if item.kind == "function_call_output":
        flag = " [error]" if item.is_error else ""
        return f"output of {item.name}{flag}: {_clip(item.output or '')!r}"
    if item.kind == "agent_handoff":
        return f"handoff {item.old_agent or '?'} -> {item.new_agent}"
    return item.kind


def _clip(text: str, limit: int = 120) -> str:
    # masked before the cut: a secret cut in half is no longer recognised
    return clip(" ".join(text.split()), limit)
