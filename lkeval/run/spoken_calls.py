"""Tool calls an agent's LLM wrote as text, which the agent then spoke to the caller.

A small model behind llama.cpp, asked with tools, often writes the call into its reply
(``{"name": "collect_email", "arguments": {}}``, or inside Hermes' ``<tool_call>`` tags) and the
server returns it as content: the agent speaks JSON to the caller and its tool never runs. The
conversation may still read as a success to a lenient judge, so such a message is marked in the
transcript (``TranscriptItem.spoken_call``) and fails the attempt's checks on its own, with or
without a judge: the agent's LLM did not call its tool.

Also home to :func:`json_spans`, the scan for JSON written inside text that the caller and
judge readers (:mod:`lkeval.llm.textcalls`) share.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lkeval.results.model import TranscriptItem, Verdict

__all__ = ["SOURCE", "json_spans", "spoken_call_verdict", "spoken_tool_call"]

SOURCE = "tool-calls"
"""The verdict source of the check (beside ``scripted``, ``judge``, ``agent``)."""
_ARGUMENT_KEYS = ("arguments", "parameters", "args")


def json_spans(text: str) -> list[tuple[int, int, Any]]:
    """Every top-level JSON object or array in ``text``, with its span, in order."""
    decoder = json.JSONDecoder()
    found: list[tuple[int, int, Any]] = []
    i = 0
    while True:
        starts = [p for p in (text.find("{", i), text.find("[", i)) if p >= 0]
        if not starts:
            return found
        i = min(starts)
        try:
            value, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i += 1
            continue
        found.append((i, end, value))
        i = end


def _called(value: Any) -> str | None:
    """The tool a JSON value calls, when it has a call's shape: a name and its arguments
    (``{"name": N, "arguments": {...}}``, OpenAI's ``{"function": {...}}``, lists of them)."""
    if isinstance(value, list):
        return next((n for n in map(_called, value) if n), None)
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict):
        return _called(value["function"])
    name = value.get("name")
    if isinstance(name, str) and name.strip() and any(k in value for k in _ARGUMENT_KEYS):
        return name.strip()
    return None


def spoken_tool_call(text: str) -> str | None:
    """The tool whose call an agent message holds as text, or None."""
    if "{" not in text:
        return None
    return next((n for _, _, v in json_spans(text) if (n := _called(v))), None)


def spoken_call_verdict(transcript: Sequence[TranscriptItem]) -> Verdict | None:
    """A failing verdict naming every agent message that was a tool call spoken as text."""
    found = [
        f"turn {item.turn}: {item.spoken_call}"
        for item in transcript
        if item.kind == "message" and item.role == "assistant" and item.spoken_call
    ]
    if not found:
        return None
    return Verdict(
        SOURCE,
        "fail",
        "the agent spoke a tool call to the caller as text instead of calling the tool "
        f"(its LLM did not call it): {'; '.join(found)}",
    )
