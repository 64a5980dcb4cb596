"""Tool calls a weak model wrote as text instead of making them.

Small models behind OpenAI-compatible servers (llama.cpp's ``llama-server``, Ollama) often
answer a tool-forcing request with the call as JSON in the content, sometimes in a fenced
block, sometimes as ``end_call(reason="...")``. The judge and the caller both need to
recognise such calls (a verdict must not be lost, an ``end_call`` must never be spoken to the
agent), and both need the rest of the text without them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from lkeval.run.spoken_calls import json_spans as _json_spans

__all__ = [
    "TextCall",
    "find_calls",
    "json_values",
    "looks_like_json",
    "outside_json",
    "without",
]

_FENCE = re.compile(r"```[a-zA-Z]*\s*|```")


@dataclass(frozen=True)
class TextCall:
    """One call found in a text: its arguments (a mapping, maybe empty) and where it was."""

    arguments: Any
    start: int
    end: int


def json_values(text: str) -> list[Any]:
    """The JSON objects and arrays written anywhere in ``text`` (fenced or not)."""
    return [value for _, _, value in _json_spans(text)]


def outside_json(text: str) -> str:
    """``text`` with every JSON object or array cut out: the prose around them."""
    parts: list[str] = []
    last = 0
    for start, end, _ in _json_spans(text):
        parts.append(text[last:start])
        last = end
    parts.append(text[last:])
    return " ".join(parts)


def looks_like_json(text: str) -> bool:
    """True when the whole text (fences aside) is one JSON object or array."""
    bare = _FENCE.sub("", text).strip()
    if not bare or bare[0] not in "{[":
        return False
    try:
        json.loads(bare)
    except json.JSONDecodeError:
        return False
    return True


def _arguments_of(value: Any, name: str) -> list[Any]:
    """The arguments of every call of ``name`` inside one JSON value.

    Accepts the shapes models write: ``{"name": N, "arguments": {...}}``, OpenAI's
    ``{"function": {"name": N, "arguments": "..."}}``, ``{"tool": N, ...}`` and lists of them.
    """
    if isinstance(value, list):
        return [a for v in value for a in _arguments_of(v, name)]
    if not isinstance(value, dict):
        return []
    if isinstance(value.get("function"), dict):
        return _arguments_of(value["function"], name)
    called = value.get("name", value.get("tool", value.get("tool_name")))
    if called != name:
        return []
    args = value.get("arguments", value.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args or "{}")
        except json.JSONDecodeError:
            args = {}
    return [args if isinstance(args, dict) else {}]


def find_calls(text: str, name: str) -> list[TextCall]:
    """Calls of tool ``name`` written in ``text``: as JSON, as ``name(...)``, or bare.

    The bare form (``end_call`` alone, or in brackets) only counts as a whole word, so a
    sentence that merely mentions it in passing inside other words does not.
    """
    calls = [
        TextCall(args, start, end)
        for start, end, value in _json_spans(text)
        for args in _arguments_of(value, name)
    ]
    taken = [(c.start, c.end) for c in calls]
    pattern = re.compile(
        rf"[\[<(*`]*\b{re.escape(name)}\b(?:\s*\((?P<args>[^()]*)\))?[\]>)*`]*", re.IGNORECASE
    )
    for match in pattern.finditer(text):
        if any(s <= match.start() < e for s, e in taken):
            continue
        calls.append(TextCall(_call_syntax_args(match.group("args")), *match.span()))
    return sorted(calls, key=lambda c: c.start)


def _call_syntax_args(raw: str | None) -> dict[str, Any]:
    """``reason="done", x=1`` → ``{"reason": "done", "x": "1"}`` (best effort)."""
    args: dict[str, Any] = {}
    for key, value in re.findall(r"(\w+)\s*[=:]\s*(\"[^\"]*\"|'[^']*'|[^,]+)", raw or ""):
        args[key] = value.strip().strip("\"'")
    return args


def without(text: str, calls: list[TextCall]) -> str:
    """``text`` with the calls (and any code fences left empty) cut out."""
    parts: list[str] = []
    last = 0
    for call in sorted(calls, key=lambda c: c.start):
        parts.append(text[last : call.start])
        last = max(last, call.end)
    parts.append(text[last:])
    rest = _FENCE.sub("", "".join(parts))
    return " ".join(rest.split())
