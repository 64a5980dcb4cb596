"""Rules for the scripted LLM server: which request gets which reply.

Kept apart from the HTTP code so the matching logic can be read (and tested) on its own.
A rule is a plain dict, so it can live in a YAML/JSON file next to a scenario. Rules are
validated when they are set, not when a request arrives: a typo in a key or a regex would
otherwise turn into a rule that silently never matches and a test that fails far away.
"""

from __future__ import annotations

import fnmatch
import json
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

MATCH_KEYS = ("model", "last_user", "system", "after_tool", "tool_choice", "has_tool", "turn")
REPLY_KEYS = (
    "text",
    "tool_calls",
    "status",
    "delay",
    "hang",
    "times",
    "tool_calls_as_text",
    "stream_error",
    "ramble",
    "retry_after",
)
TOOL_TEXT_STYLES = ("json", "fenced")
_PLACEHOLDER = re.compile(r"\{(last_user|tool_output)\}")


class RuleError(ValueError):
    """A rule or rules file is malformed; the message says where."""


@dataclass(frozen=True)
class ToolCall:
    """One function call the scripted assistant makes; ``arguments`` is sent verbatim."""

    name: str
    arguments: str


@dataclass(frozen=True)
class Reply:
    """What the server answers to one request; with ``status`` set, ``text`` is the error text.

    The last three fields reproduce weak models and real servers (see docs/testing.md):
    ``tool_calls_as_text`` writes the calls into the content as JSON ("json") or a fenced
    block ("fenced") instead of structured calls; ``stream_error`` sends that message as an
    error event inside an HTTP 200 stream (HTTP 500 when not streaming) after ``text``;
    ``ramble`` keeps generating until ``max_tokens`` (finish "length") or, unset, forever.
    ``retry_after`` (seconds) is sent with an error status as ``retry-after-ms`` and
    ``Retry-After``, as OpenAI does; unset, a 429 carries ``Retry-After: 0``.
    """

    text: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    status: int | None = None
    delay: float = 0.0
    hang: bool = False
    tool_calls_as_text: str | None = None
    stream_error: str | None = None
    ramble: bool = False
    retry_after: float | None = None
    pad: bool = False
    """Newlines after the answer, one per token, up to ``max_tokens`` (finish "length"): what
    a small model on llama.cpp does after writing a forced tool call as text."""


def message_text(content: Any) -> str:
    """Text of a message's content, which OpenAI allows as a string or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def _messages(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    msgs = request.get("messages")
    return [m for m in msgs if isinstance(m, dict)] if isinstance(msgs, list) else []


def _last_text(msgs: list[dict[str, Any]], role: str) -> str:
    return next(
        (message_text(m.get("content")) for m in reversed(msgs) if m.get("role") == role), ""
    )


def _after_tool_name(msgs: list[dict[str, Any]]) -> str | None:
    """Name of the function whose result is the last message; "" if the call can't be found."""
    if not msgs or msgs[-1].get("role") != "tool":
        return None
    call_id = msgs[-1].get("tool_call_id")
    for m in reversed(msgs[:-1]):
        calls = m.get("tool_calls") if m.get("role") == "assistant" else None
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict) and call.get("id") == call_id:
                return str((call.get("function") or {}).get("name") or "")
    return ""


def _forced_tool(request: Mapping[str, Any]) -> str | None:
    choice = request.get("tool_choice")
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        return name if isinstance(name, str) else None
    return choice if isinstance(choice, str) else None


def _choices(request: Mapping[str, Any]) -> set[str]:
    """What a rule's ``tool_choice`` may name to match: the forced tool, and with ``required``
    and a single tool offered, that tool too (the model has no other call to make)."""
    forced = _forced_tool(request)
    if forced is None:
        return set()
    offered = _offered_tools(request)
    return {forced, *offered} if forced == "required" and len(offered) == 1 else {forced}


def _offered_tools(request: Mapping[str, Any]) -> set[str]:
    tools = request.get("tools") if isinstance(request.get("tools"), list) else []
    return {
        str((t.get("function") or {}).get("name"))
        for t in tools or []
        if isinstance(t, dict) and isinstance(t.get("function"), dict)
    }


@dataclass
class _Rule:
    """A validated rule with its regexes compiled and its remaining uses counted."""

    raw: dict[str, Any]
    reply: Reply
    last_user: re.Pattern[str] | None
    system: re.Pattern[str] | None
    remaining: int | None

    def matches(self, request: Mapping[str, Any]) -> bool:
        r, msgs = self.raw, _messages(request)
        model = str(request.get("model", ""))
        if "model" in r and not (model == r["model"] or fnmatch.fnmatchcase(model, r["model"])):
            return False
        if self.last_user and not self.last_user.search(_last_text(msgs, "user")):
            return False
        if self.system:
            sys_text = "\n".join(
                message_text(m.get("content"))
                for m in msgs
                if m.get("role") in ("system", "developer")
            )
            if not self.system.search(sys_text):
                return False
        if "after_tool" in r:
            name = _after_tool_name(msgs)
            if name is None or (r["after_tool"] != "*" and name != r["after_tool"]):
                return False
        if "tool_choice" in r and r["tool_choice"] not in _choices(request):
            return False
        if "has_tool" in r and r["has_tool"] not in _offered_tools(request):
            return False
        return "turn" not in r or sum(m.get("role") == "user" for m in msgs) == r["turn"]


def _need(ok: bool, where: str, what: str) -> None:
    if not ok:
        raise RuleError(f"{where}: {what}")


def _regex(raw: dict[str, Any], key: str, where: str) -> re.Pattern[str] | None:
    if key not in raw:
        return None
    _need(isinstance(raw[key], str), where, f"{key!r} must be a string")
    try:
        return re.compile(raw[key], re.IGNORECASE)
    except re.error as e:
        raise RuleError(f"{where}: {key!r} is not a valid regex: {e}") from None


def _tool_calls(value: Any, where: str) -> tuple[ToolCall, ...]:
    _need(isinstance(value, list), where, "'tool_calls' must be a list")
    calls = []
    for call in value:
        _need(
            isinstance(call, dict) and isinstance(call.get("name"), str),
            where,
            "each tool call needs a string 'name'",
        )
        _need(set(call) <= {"name", "arguments"}, where, "a tool call has only 'name', 'arguments'")
        args = call.get("arguments", {})
        _need(isinstance(args, (dict, str)), where, "'arguments' must be a mapping or a string")
        calls.append(ToolCall(call["name"], args if isinstance(args, str) else json.dumps(args)))
    return tuple(calls)


def _compile_rule(raw: Mapping[str, Any], where: str = "rule") -> _Rule:
    """Validate one rule dict; raise :class:`RuleError` naming ``where`` if it is malformed."""
    _need(isinstance(raw, Mapping), where, "a rule must be a mapping")
    rule = dict(raw)
    unknown = sorted(set(rule) - set(MATCH_KEYS) - set(REPLY_KEYS))
    _need(not unknown, where, f"unknown key(s) {', '.join(unknown)}")
    for key in ("model", "after_tool", "tool_choice", "has_tool", "text", "stream_error"):
        _need(key not in rule or isinstance(rule[key], str), where, f"{key!r} must be a string")

    def is_int(key: str, low: int, high: int | None = None) -> bool:
        v = rule.get(key)
        return isinstance(v, int) and not isinstance(v, bool) and low <= v <= (high or v)

    _need("turn" not in rule or is_int("turn", 0), where, "'turn' must be an int >= 0")
    _need("times" not in rule or is_int("times", 1), where, "'times' must be an int >= 1")
    _need("status" not in rule or is_int("status", 400, 599), where, "'status' must be 400-599")
    for key in ("delay", "retry_after"):
        value = rule.get(key, 0)
        _need(
            isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0,
            where,
            f"{key!r} must be a number >= 0",
        )
    delay = rule.get("delay", 0)
    retry_after = rule.get("retry_after")
    for flag in ("hang", "ramble"):
        _need(isinstance(rule.get(flag, False), bool), where, f"{flag!r} must be true or false")
    style = rule.get("tool_calls_as_text")
    _need(
        style is None or style in TOOL_TEXT_STYLES,
        where,
        f"'tool_calls_as_text' must be one of {', '.join(TOOL_TEXT_STYLES)}",
    )
    calls = _tool_calls(rule["tool_calls"], where) if "tool_calls" in rule else ()
    reply = Reply(
        rule.get("text"),
        calls,
        rule.get("status"),
        float(delay),
        rule.get("hang", False),
        style,
        rule.get("stream_error"),
        rule.get("ramble", False),
        None if retry_after is None else float(retry_after),
    )
    return _Rule(
        rule,
        reply,
        _regex(rule, "last_user", where),
        _regex(rule, "system", where),
        rule.get("times"),
    )


def read_rules_file(path: str | Path) -> tuple[list[dict[str, Any]], str | None]:
    """Rules and optional ``default_text`` from a YAML/JSON file: a list, or ``{rules: [...]}``."""
    rules, default_text, _ = read_rules_config(path)
    return rules, default_text


def read_rules_config(
    path: str | Path,
) -> tuple[list[dict[str, Any]], str | None, dict[str, Any] | None]:
    """Rules, ``default_text`` and the raw ``server:`` quirks mapping of a rules file.

    The quirks are validated by :func:`lkeval.testing.llm_quirks.parse_quirks` (which needs
    this module, hence not here).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
        data = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
    except OSError as e:
        raise RuleError(f"{path}: {e.strerror or e}") from None
    except (ValueError, yaml.YAMLError) as e:  # UnicodeDecodeError is a ValueError
        raise RuleError(f"{path}: {' '.join(str(e).split())}") from None
    default_text, server = None, None
    if isinstance(data, dict):
        _need(
            set(data) <= {"rules", "default_text", "server"},
            str(path),
            "top-level keys: rules, default_text, server",
        )
        server = data.get("server")
        default_text = data.get("default_text")
        _need(
            default_text is None or isinstance(default_text, str),
            str(path),
            "'default_text' must be a string",
        )
        data = data.get("rules")
    data = [] if data is None else data
    _need(isinstance(data, list), str(path), "expected a list of rules or a mapping with 'rules'")
    for i, rule in enumerate(data, 1):
        _compile_rule(rule, f"{path}: rule {i}")
    return data, default_text, server


def load_rules(path: str | Path) -> list[dict[str, Any]]:
    """Load and validate the rules of a YAML/JSON file; raise :class:`RuleError` if malformed."""
    return read_rules_file(path)[0]


class RuleBook:
    """The server's current script: ordered rules, their use counts, and the fallback text.

    Thread-safe because the HTTP server answers requests on several threads and a test may
    change the script while a request is in flight.
    """

    def __init__(self, rules: Iterable[Mapping[str, Any]] = (), default_text: str = "OK.") -> None:
        self.default_text = default_text
        self._lock = threading.Lock()
        self._rules: list[_Rule] = []
        self.set_rules(rules)

    def set_rules(self, rules: Iterable[Mapping[str, Any]]) -> None:
        """Replace the whole script (use counts start afresh)."""
        compiled = [_compile_rule(r, f"rule {i}") for i, r in enumerate(rules, 1)]
        with self._lock:
            self._rules = compiled

    def add_rule(self, rule: Mapping[str, Any]) -> None:
        """Append one rule; it is tried after the existing ones."""
        with self._lock:
            self._rules.append(_compile_rule(rule, f"rule {len(self._rules) + 1}"))

    def model_names(self) -> list[str]:
        """Exact (non-glob) model names the rules mention, for ``GET /models``."""
        with self._lock:
            names = (r.raw.get("model") for r in self._rules)
            return sorted(
                {n for n in names if isinstance(n, str) and not any(c in n for c in "*?[")}
            )

    def pick(self, request: Mapping[str, Any]) -> Reply:
        """The reply of the first unspent matching rule (spending one use), else the default."""
        with self._lock:
            rule = next((r for r in self._rules if r.remaining != 0 and r.matches(request)), None)
            if rule is None:
                return Reply(self.default_text)
            if rule.remaining is not None:
                rule.remaining -= 1
        reply = rule.reply
        if reply.text is None:
            quiet = reply.tool_calls or reply.status or reply.stream_error
            return reply if quiet else replace(reply, text=self.default_text)
        msgs = _messages(request)
        values = {"last_user": _last_text(msgs, "user"), "tool_output": _last_text(msgs, "tool")}
        return replace(reply, text=_PLACEHOLDER.sub(lambda m: values[m.group(1)], reply.text))
