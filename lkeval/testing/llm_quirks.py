"""Server-wide quirks of real OpenAI-compatible servers and weak models, for the scripted LLM.

Rules (:mod:`lkeval.testing.llm_rules`) say what the model answers; quirks say how the server
around it behaves, the same for every request. They come from the ``server:`` mapping of a rules
file or ``LLMServer(quirks=...)``. Each reproduces something seen on a real server
(docs/testing.md):

- ``named_tool_choice: ignore`` — llama.cpp's ``llama-server`` ignores a ``tool_choice`` given as
  ``{"type": "function", "function": {"name": ...}}``: it logs "Wrong type supplied for parameter
  'tool_choice'" and falls back to ``auto`` (``"required"`` is honoured). Rules then see
  ``auto``, so a rule with ``tool_choice: submit_verdict`` no longer matches.
- ``timings: true`` — llama.cpp's extra ``timings`` object on the last stream chunk and on a
  non-streamed completion (clients must ignore unknown fields).
- ``delay: SECONDS`` — every answer waits this long first (a slow model), on top of a rule's own.
- ``noisy_verdicts: {fraction, seed, tool, field, exact}`` — a noisy judge: each verdict tool
  call's ``pass``/``fail`` is flipped with probability ``fraction`` by a seeded generator, so a
  bench can measure false-block and catch rates reproducibly. With ``exact: true`` it flips
  exactly that share instead: the verdicts, in the order the server answers them, fall into
  blocks (the smallest ``n <= 100`` with ``n * fraction`` whole, else 100) and each block flips
  its share (rounded, the remainder carried to the next block) at seeded random places, so
  after ``n`` verdicts ``flipped`` is ``n * fraction`` within one block's rounding (at 0.1: of
  every 10 verdicts exactly one). A random flipper's share wanders (a 10% one flipped 7% of
  641 verdicts in one bench run), and a bench that states the judge's error must deliver it.
  With ``only: fail`` the judge is one-sided: only its fail verdicts are flipped (and counted),
  so it passes known-bad conversations ``fraction`` of the time and is right otherwise.
- ``required_tool_choice: as_text`` — llama.cpp with Qwen2.5 GGUFs (Hermes ``<tool_call>``
  template): ``tool_choice: "required"`` is accepted, but the model writes the call into the
  content as JSON (``tool_calls: []``) and then pads with newlines up to ``max_tokens``
  (``finish_reason: "length"``), so such a call always costs the whole cap.
- ``json_schema: enforce`` — a ``response_format`` of type ``json_schema`` is enforced (llama.cpp
  compiles it to a grammar): the answer is the rule's first tool call's arguments as the JSON
  content, nothing before or after it, no tool call.
- ``usage: omit`` — no usage chunk even when the request asks for one
  (``stream_options.include_usage``), as servers that do not implement it (and proxies that
  drop it) answer: a client that needs token counts must say they are unknown.
- ``like: llama-server`` — a preset: ``named_tool_choice: ignore``, ``timings: true``,
  ``required_tool_choice: as_text`` and ``json_schema: enforce``.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from lkeval.testing.llm_rules import Reply, RuleError, ToolCall

# The warning llama.cpp's server logs (json_value in its utils.hpp) when tool_choice is an object.
LLAMA_TOOL_CHOICE_WARNING = (
    "Wrong type supplied for parameter 'tool_choice'. Expected 'string', using default value"
)
PRESETS: dict[str, dict[str, Any]] = {
    "openai": {},
    "llama-server": {
        "named_tool_choice": "ignore",
        "timings": True,
        "required_tool_choice": "as_text",
        "json_schema": "enforce",
    },
}
_KEYS = (
    "like",
    "named_tool_choice",
    "timings",
    "delay",
    "noisy_verdicts",
    "required_tool_choice",
    "json_schema",
    "usage",
)
_FLIPPED = {"pass": "fail", "fail": "pass"}


class NoisyVerdicts:
    """Flips ``fraction`` of the verdicts in calls to ``tool`` (seeded, thread-safe): each with
    that probability, or with ``exact`` exactly that share (see the module docstring).

    ``seen`` and ``flipped`` count the verdicts it saw and changed, for a bench to report;
    ``answers`` lists each one's (verdict as the rules gave it, verdict sent, the call's
    ``reasoning``), in the order answered, so a bench can check what a client recorded.
    """

    def __init__(
        self,
        fraction: float,
        seed: int = 0,
        tool: str = "submit_verdict",
        key: str = "verdict",
        exact: bool = False,
        only: str | None = None,
    ) -> None:
        self.fraction, self.seed, self.tool, self.key = fraction, seed, tool, key
        self.exact = exact
        self.only = only  # "fail": a one-sided judge, only fails are flipped (and counted)
        self.seen = self.flipped = 0
        self.answers: list[tuple[str, str, str]] = []
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._block = _block_size(fraction)
        self._flips: set[int] = set()  # exact: the places flipped in the current block

    def _draw(self) -> bool:
        """Whether the verdict just seen (number ``seen``) is flipped; under the lock."""
        if not self.exact:
            return self._rng.random() < self.fraction
        index, place = divmod(self.seen - 1, self._block)
        if place == 0:  # a new block: its share, the previous blocks' rounding carried
            size = self._block
            share = round((index + 1) * size * self.fraction) - round(index * size * self.fraction)
            self._flips = set(self._rng.sample(range(size), share))
        return place in self._flips

    def apply(self, reply: Reply) -> Reply:
        """``reply`` with each eligible verdict flipped by chance; counts what it saw."""
        calls = tuple(self._maybe_flip(c) for c in reply.tool_calls)
        return replace(reply, tool_calls=calls) if calls != reply.tool_calls else reply

    def _maybe_flip(self, call: ToolCall) -> ToolCall:
        if call.name != self.tool:
            return call
        try:
            args = json.loads(call.arguments)
        except ValueError:
            return call
        if not isinstance(args, dict) or args.get(self.key) not in _FLIPPED:
            return call
        if self.only is not None and args[self.key] != self.only:
            return call
        original = args[self.key]
        with self._lock:
            self.seen += 1
            flip = self._draw()
            self.flipped += flip
            sent = _FLIPPED[original] if flip else original
            self.answers.append((original, sent, str(args.get("reasoning", ""))))
        if not flip:
            return call
        args[self.key] = sent
        return ToolCall(call.name, json.dumps(args))


def _block_size(fraction: float) -> int:
    """The smallest block of verdicts of which ``fraction`` is a whole number (at most 100)."""
    for size in range(1, 101):
        if abs(size * fraction - round(size * fraction)) < 1e-9:
            return size
    return 100


@dataclass
class ServerQuirks:
    """How the server behaves around the rules; the defaults are OpenAI's."""

    named_tool_choice: str = "honour"
    timings: bool = False
    delay: float = 0.0
    noisy_verdicts: NoisyVerdicts | None = None
    required_tool_choice: str = "honour"
    json_schema: str = "ignore"
    usage: str = "send"

    def effective_request(self, body: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """The request as the model sees it, and the warning the server logs about it."""
        choice = body.get("tool_choice")
        if self.named_tool_choice == "ignore" and isinstance(choice, dict):
            return {**body, "tool_choice": "auto"}, LLAMA_TOOL_CHOICE_WARNING
        return body, None

    def shape(self, reply: Reply, body: Mapping[str, Any] | None = None) -> Reply:
        """The reply after server-wide noise, the rule's ``tool_calls_as_text`` and what the
        server does with the request's ``tool_choice`` and ``response_format``."""
        body = body or {}
        if self.noisy_verdicts is not None:
            reply = self.noisy_verdicts.apply(reply)
        if self.json_schema == "enforce" and _wants_json_schema(body) and reply.tool_calls:
            return replace(reply, text=_arguments_json(reply), tool_calls=(), ramble=False)
        if reply.tool_calls_as_text and reply.tool_calls:
            reply = replace(reply, text=_calls_as_text(reply), tool_calls=())
        as_text = self.required_tool_choice == "as_text"
        if as_text and body.get("tool_choice") == "required" and reply.tool_calls:
            reply = replace(reply, text=_calls_as_text(reply), tool_calls=(), pad=True)
        return reply


def _wants_json_schema(body: Mapping[str, Any]) -> bool:
    form = body.get("response_format")
    return isinstance(form, Mapping) and form.get("type") == "json_schema"


def _arguments_json(reply: Reply) -> str:
    """The first call's arguments, compact, as a grammar-constrained model writes them."""
    return json.dumps(_loads_or_raw(reply.tool_calls[0].arguments), separators=(",", ":"))


def _calls_as_text(reply: Reply) -> str:
    """The calls written the way small models write them in content: JSON, maybe fenced."""
    objects = [{"name": c.name, "arguments": _loads_or_raw(c.arguments)} for c in reply.tool_calls]
    body = json.dumps(objects[0] if len(objects) == 1 else objects)
    if reply.tool_calls_as_text == "fenced":
        body = f"```json\n{body}\n```"
    return f"{reply.text}\n{body}" if reply.text else body


def _loads_or_raw(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def _need(ok: bool, where: str, what: str) -> None:
    if not ok:
        raise RuleError(f"{where}: {what}")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _noisy(raw: Any, where: str) -> NoisyVerdicts:
    where = f"{where}: noisy_verdicts"
    _need(isinstance(raw, Mapping), where, "must be a mapping")
    unknown = sorted(set(raw) - {"fraction", "seed", "tool", "field", "exact", "only"})
    _need(not unknown, where, f"unknown key(s) {', '.join(unknown)}")
    fraction = raw.get("fraction")
    _need(_number(fraction) and 0 <= fraction <= 1, where, "'fraction' must be 0..1")
    seed = raw.get("seed", 0)
    _need(isinstance(seed, int) and not isinstance(seed, bool), where, "'seed' must be an int")
    for key in ("tool", "field"):
        _need(isinstance(raw.get(key, ""), str), where, f"{key!r} must be a string")
    exact = raw.get("exact", False)
    _need(isinstance(exact, bool), where, "'exact' must be true/false")
    only = raw.get("only")
    _need(only in (None, "pass", "fail"), where, "'only' must be pass or fail")
    return NoisyVerdicts(
        float(fraction),
        seed,
        raw.get("tool", "submit_verdict"),
        raw.get("field", "verdict"),
        exact,
        only,
    )


def parse_quirks(raw: Mapping[str, Any] | None, where: str = "server") -> ServerQuirks:
    """Validate a ``server:`` mapping; raise :class:`RuleError` naming ``where`` if malformed."""
    if raw is None:
        return ServerQuirks()
    _need(isinstance(raw, Mapping), where, "must be a mapping")
    unknown = sorted(set(raw) - set(_KEYS))
    _need(not unknown, where, f"unknown key(s) {', '.join(unknown)}")
    like = raw.get("like", "openai")
    _need(like in PRESETS, where, f"'like' must be one of {', '.join(PRESETS)}")
    merged = {**PRESETS[like], **{k: v for k, v in raw.items() if k != "like"}}
    named = merged.get("named_tool_choice", "honour")
    _need(named in ("honour", "ignore"), where, "'named_tool_choice' must be honour or ignore")
    _need(isinstance(merged.get("timings", False), bool), where, "'timings' must be true/false")
    delay = merged.get("delay", 0)
    _need(_number(delay) and delay >= 0, where, "'delay' must be a number >= 0")
    noisy = merged.get("noisy_verdicts")
    required = merged.get("required_tool_choice", "honour")
    _need(
        required in ("honour", "as_text"), where, "'required_tool_choice' must be honour or as_text"
    )
    schema = merged.get("json_schema", "ignore")
    _need(schema in ("ignore", "enforce"), where, "'json_schema' must be ignore or enforce")
    usage = merged.get("usage", "send")
    _need(usage in ("send", "omit"), where, "'usage' must be send or omit")
    return ServerQuirks(
        named,
        merged.get("timings", False),
        float(delay),
        _noisy(noisy, where) if noisy is not None else None,
        required,
        schema,
        usage,
    )
