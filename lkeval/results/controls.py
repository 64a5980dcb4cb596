"""Negative controls: known-bad variants of a passing transcript, for ``lkeval calibrate``.

A judge that passes a transcript in which the agent never booked, booked the wrong date or
refused is a judge that passes broken agents. Each control is one deterministic edit of a
transcript the judge passed, of the kinds an agent's regressions take:

* ``drop-tool-call``: the last tool call and its output removed (the decisive action never
  happened, though the agent may still say it did);
* ``changed-values``: each value of the last tool call's arguments changed (its last digit one
  up: a date a day later; a name without digits reversed), in the call and in what the agent
  said afterwards;
* ``no-confirmation``: the agent's last message removed;
* ``refusal``: the agent's last message replaced by a refusal.

A control that would not differ from the original (no tool call, no agent message) is not built.

Every run checks each passing decision of the conversation judge against one more control,
:func:`paired_control` (``refused-everything``: every agent reply a refusal, every tool call and
its output removed), asked up to :data:`PAIRED_ASKS` times and stopping at its first fail: a
judge that passes it every time has said nothing about that scenario (``docs/sampling.md``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lkeval.results.model import RunResults, TranscriptItem
from lkeval.scenarios.model import Scenario

REFUSAL = "I'm sorry, but I can't help with that request."
MIN_SAID_CHARS = 3
CONTROL_KINDS = ("drop-tool-call", "changed-values", "no-confirmation", "refusal")
PAIRED_KIND = "refused-everything"
#: Asks of the paired control at most; a judge flipping 10% of its verdicts passes it on all
#: of them in 0.01% of passing decisions (0.2% of a 20-scenario suite's runs).
PAIRED_ASKS = 4

Transcript = tuple[TranscriptItem, ...]


def negative_controls(transcript: Sequence[TranscriptItem]) -> list[tuple[str, Transcript]]:
    """(kind, transcript) for each control this transcript allows, in ``CONTROL_KINDS`` order."""
    items = tuple(transcript)
    built = [
        ("drop-tool-call", _drop_tool_call(items)),
        ("changed-values", _changed_values(items)),
        ("no-confirmation", _without_last_reply(items)),
        ("refusal", _refusal(items)),
    ]
    return [(kind, control) for kind, control in built if control is not None and control != items]


def _last(items: Transcript, kind: str, role: str | None = None) -> int | None:
    for i in range(len(items) - 1, -1, -1):
        if items[i].kind == kind and (role is None or items[i].role == role):
            return i
    return None


def _drop_tool_call(items: Transcript) -> Transcript | None:
    at = _last(items, "function_call")
    if at is None:
        return None
    call = items[at]
    return tuple(
        item
        for i, item in enumerate(items)
        if i != at
        and not (
            item.kind == "function_call_output" and call.call_id and item.call_id == call.call_id
        )
    )


def _changed_values(items: Transcript) -> Transcript | None:
    at = _last(items, "function_call")
    if at is None or not items[at].arguments:
        return None
    try:
        arguments = json.loads(items[at].arguments or "")
    except ValueError:
        return None
    changes = {v: _changed(v) for v in _strings(arguments) if _changed(v) != v}
    if not changes:
        return None
    out = list(items)
    changed = json.dumps(_map_values(arguments, changes), ensure_ascii=False)
    out[at] = dataclasses.replace(items[at], arguments=changed)
    # What the agent said afterwards follows the call, for values long enough to be the
    # value and not a digit of something else ("2" nights must not turn GH-1042 into GH-1043).
    said = {old: new for old, new in changes.items() if len(old) >= MIN_SAID_CHARS}
    for i in range(at + 1, len(out)):
        if out[i].kind == "message" and out[i].role == "assistant":
            out[i] = dataclasses.replace(out[i], text=_replace_all(out[i].text, said))
    return tuple(out)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [str(value)]
    return []


def _map_values(value: Any, changes: dict[str, str]) -> Any:
    """The arguments with each value changed in place (a number stays a number)."""
    if isinstance(value, str):
        return changes.get(value, value)
    if isinstance(value, dict):
        return {k: _map_values(v, changes) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_values(v, changes) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        new = changes.get(str(value), str(value))
        return type(value)(new)
    return value


def _changed(value: str) -> str:
    """The last digit one up (2025-03-03 -> 2025-03-04, 9 -> 0); a value without digits
    reversed, capitalised as it was (Smith -> Htims)."""
    digits = [i for i, c in enumerate(value) if c.isdigit()]
    if digits:
        at = digits[-1]
        return value[:at] + str((int(value[at]) + 1) % 10) + value[at + 1 :]
    flipped = value[::-1]
    return flipped[:1].upper() + flipped[1:].lower() if value[:1].isupper() else flipped


def _replace_all(text: str, changes: dict[str, str]) -> str:
    for old in sorted(changes, key=len, reverse=True):  # longer values first
        text = text.replace(old, changes[old])
    return text


def _without_last_reply(items: Transcript) -> Transcript | None:
    at = _last(items, "message", "assistant")
    if at is None:
        return None
    return items[:at] + items[at + 1 :]


def _refusal(items: Transcript) -> Transcript | None:
    at = _last(items, "message", "assistant")
    if at is None or items[at].text == REFUSAL:
        return None
    return (*items[:at], dataclasses.replace(items[at], text=REFUSAL), *items[at + 1 :])


def paired_control(transcript: Sequence[TranscriptItem]) -> Transcript | None:
    """The conversation with every agent message replaced by :data:`REFUSAL` and every tool
    call and its output removed: the agent did nothing. None when that changes nothing."""
    items = tuple(transcript)
    out = tuple(
        dataclasses.replace(item, text=REFUSAL)
        if item.kind == "message" and item.role == "assistant"
        else item
        for item in items
        if item.kind not in ("function_call", "function_call_output")
    )
    return out if out != items else None


@dataclass(frozen=True)
class PairedVotes:
    """The judge's answers on a passing decision's paired control (``True``: counted as a pass
    under the gate's rule)."""

    passes: tuple[bool, ...] = ()

    @property
    def passed_it(self) -> bool:
        """The judge passed the known-bad control on every one of :data:`PAIRED_ASKS` asks."""
        return len(self.passes) >= PAIRED_ASKS and all(self.passes)

    def text(self) -> str:
        """``the judge failed a known-bad version of this conversation (1 call)``."""
        calls = f"{PAIRED_KIND}: {len(self.passes)} call{'s' if len(self.passes) != 1 else ''}"
        if self.passed_it:
            return (
                "the judge also passed a known-bad version of this conversation "
                f"({calls}, every one a pass)"
            )
        return f"the judge failed a known-bad version of this conversation ({calls})"


__all__ = [
    "CONTROL_KINDS",
    "PAIRED_ASKS",
    "PAIRED_KIND",
    "REFUSAL",
    "PairedVotes",
    "negative_controls",
    "paired_control",
]


#: (transcript, agent expectations, caller instructions): a conversation the judge must fail.
KnownBad = tuple[tuple[TranscriptItem, ...], str, str]


def suite_controls(
    baseline: RunResults,
    scenarios: Sequence[Scenario],
    calibrated: Mapping[str, tuple[str, object]],
    limit: int,
) -> tuple[KnownBad, ...]:
    """Known-bad versions of the suite's own conversations, for the judge preflight: for each
    scenario a calibration in force covers (the same content digest), the baseline's passing
    transcript with every agent reply a refusal and every tool call removed
    (:func:`paired_control`), judged against the scenario's own expectations. A judge that
    games the built-in canaries (it recognises them) meets the suite's conversations instead."""
    passing = {
        result.scenario_id: attempt.transcript
        for result in baseline.scenarios
        for attempt in result.attempts
        if attempt.status == "passed" and attempt.transcript
    }
    found: list[KnownBad] = []
    for scenario in scenarios:
        digest = calibrated.get(scenario.id, ("", None))[0]
        transcript = passing.get(scenario.id)
        if digest != scenario.digest or not transcript or not scenario.agent_expectations:
            continue
        control = paired_control(transcript)
        if control is not None:
            found.append((tuple(control), scenario.agent_expectations, scenario.instructions))
        if len(found) >= limit:
            break
    return tuple(found)
