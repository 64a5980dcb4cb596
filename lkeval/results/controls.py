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
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from lkeval.results.model import TranscriptItem

REFUSAL = "I'm sorry, but I can't help with that request."
MIN_SAID_CHARS = 3
CONTROL_KINDS = ("drop-tool-call", "changed-values", "no-confirmation", "refusal")

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


__all__ = ["CONTROL_KINDS", "REFUSAL", "negative_controls"]
