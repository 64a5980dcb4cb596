"""Record and replay HTTP exchanges in whichever process runs it: the agent's, or lk-eval's own.

Standard library only, and importing nothing from lk-eval: the agent host loads this file by
path (like ``host/agent_host.py``) into an agent interpreter that may have livekit-agents and
nothing of lk-eval's dependencies. It patches the transports of whichever of httpx (and its
successor httpx2, which the OpenAI SDK uses), aiohttp and requests are importable, so the
agent's LLM calls (the OpenAI SDK, LiveKit Inference, other providers' HTTP APIs) and its
tools' HTTP calls are all seen, without a proxy: a recording proxy cannot read HTTPS without a
MITM certificate the agent would have to trust, and vcrpy is not installed in the agent's venv
(docs/replay.md says more).

The transports are patched in :mod:`lkeval.host.transports` (its sibling, loaded the same
way); this file is what they share: the tape, and requests and responses as a cassette keeps
them. A :class:`Tape` is one client's exchanges (the agent's, or lk-eval's caller's or
judge's) in one scenario attempt. For each request it decides: replay a recorded exchange
whose request matches (:func:`request_key`: method, host, path and the canonical JSON body
after scrubbing), go live
(record mode, or auto mode from the first request with no match), or refuse (replay mode: a
miss, answered with an HTTP 400 whose body names it; lk-eval ends the attempt as an error from
the tape's record of the miss, so a swallowed 400 can never pass). Streaming responses are kept
as the chunks the transport delivered, so SSE parsers see the same stream on replay.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import threading
import urllib.parse
from collections.abc import Callable
from typing import Any

FORMAT_VERSION = 2
"""2: each exchange says which calls were still in flight when it started (``concurrent``), so
a replay keeps the recorded order within a client except among calls that overlapped."""
CLIENT_AGENT = "agent"
TAPE_ENV = "LKEVAL_TAPE"
"""The agent's tape file: its recorded exchanges, the mode and the scrub rules (JSON)."""
TAPE_OUT_ENV = "LKEVAL_TAPE_OUT"
"""Where the agent appends what happened, one JSON object per line."""
ALIASES_ENV = "LKEVAL_TAPE_ALIASES"
"""URL prefixes of a local forwarder and where it forwards them (JSON object): lk-eval's local
speech server (``--speech local``) passes the agent's LLM calls on unchanged from a per-attempt
prefix on a random port, so a request is taped as the forwarded one, and matches a recording
made on another port, attempt, or without the server."""
MAX_EPISODE_BYTES = 32 * 1024 * 1024
"""What one client may record in one attempt; past it recording stops and says so."""
MODES = ("auto", "replay", "record")
#: Request fields volatile by nature: ids and caller tags a client makes up per request, and
#: options that change how a stream is delivered, not what it says.
VOLATILE_FIELDS = (
    "user",
    "stream_options",
    "request_id",
    "prompt_cache_key",
    "safety_identifier",
)
#: Response headers kept: what a client reads to parse the body or to retry. The rest (dates,
#: request ids, cookies, server timings) would change on every re-record or leak a session.
KEPT_RESPONSE_HEADERS = ("content-type", "content-encoding", "retry-after", "retry-after-ms")
SCRUBBED = "<scrubbed>"
MISS_STATUS = 400
_CONTEXT = 40


class RulesError(ValueError):
    """A scrub-rules file that cannot be used; the message names the field."""


class Rules:
    """What else to ignore when requests are compared: JSON paths removed from bodies, and
    regexes whose matches are replaced wherever they occur (body strings, the path)."""

    def __init__(self, fields: list[str] | None = None, patterns: list[str] | None = None) -> None:
        self.fields = [_parse_path(f) for f in fields or ()]
        self.field_texts = list(fields or ())
        try:
            self.patterns = [re.compile(p) for p in patterns or ()]
        except re.error as exc:
            raise RulesError(f"ignore_patterns: {exc.pattern!r} is not a regex: {exc}") from None

    @classmethod
    def from_json(cls, data: Any) -> Rules:
        """Rules from a parsed file: ``{"ignore_fields": [...], "ignore_patterns": [...]}``."""
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise RulesError("the rules file must hold one JSON object")
        unknown = sorted(set(data) - {"ignore_fields", "ignore_patterns"})
        if unknown:
            raise RulesError(f"unknown key {unknown[0]!r} (known: ignore_fields, ignore_patterns)")
        lists = []
        for key in ("ignore_fields", "ignore_patterns"):
            value = data.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise RulesError(f"{key} must be a list of strings")
            lists.append(value)
        return cls(lists[0], lists[1])

    def to_json(self) -> dict[str, list[str]]:
        """The rules as a rules file holds them (handed to the agent in its tape)."""
        return {
            "ignore_fields": list(self.field_texts),
            "ignore_patterns": [p.pattern for p in self.patterns],
        }

    def digest(self) -> str:
        """What the rules are, in a cassette's ``recorded_with`` ("" for none): a rule changes
        which requests match, so a cassette recorded under other rules is not replayed (a
        wider rule could make a changed request match a stale recording)."""
        data = self.to_json()
        if not any(data.values()):
            return ""
        text = json.dumps(data, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def text(self, value: str) -> str:
        """``value`` with every pattern's matches replaced."""
        for pattern in self.patterns:
            value = pattern.sub(SCRUBBED, value)
        return value


_PATH_PART = re.compile(r"\[(\*|\d+)\]|([^.\[\]]+)")


def _parse_path(text: str) -> list[str | int | None]:
    """``messages[*].content`` → ["messages", None, "content"] (None: any key or index)."""
    parts: list[str | int | None] = []
    position = 0
    for match in _PATH_PART.finditer(text):
        between = text[position : match.start()]
        if between not in ("", "."):
            break
        index, key = match.groups()
        parts.append(None if index == "*" or key == "*" else int(index) if index else key)
        position = match.end()
    if not parts or position != len(text):
        raise RulesError(f"ignore_fields: {text!r} is not a path like messages[*].content")
    return parts


def _drop(value: Any, path: list[str | int | None]) -> Any:
    """``value`` without what ``path`` names (a copy; missing parts are fine)."""
    if not path:
        return SCRUBBED
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        keys = list(value) if head is None else [head] if head in value else []
        out = dict(value)
        for key in keys:
            if rest:
                out[key] = _drop(value[key], rest)
            else:
                out.pop(key)
        return out
    if isinstance(value, list):
        picks = range(len(value)) if head is None else [head] if isinstance(head, int) else []
        out_list = list(value)
        for i in picks:
            if isinstance(i, int) and 0 <= i < len(value):
                out_list[i] = _drop(value[i], rest) if rest else SCRUBBED
        return out_list
    return value


def _scrub_strings(value: Any, rules: Rules) -> Any:
    if isinstance(value, str):
        return rules.text(value)
    if isinstance(value, dict):
        return {k: _scrub_strings(v, rules) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_strings(v, rules) for v in value]
    return value


# --- requests and responses as a cassette keeps them ----------------------------------------------


def body_record(data: bytes, content_type: str = "") -> dict[str, Any]:
    """A body as the cassette keeps it: parsed JSON, text, or base64 for binary."""
    if not data:
        return {}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}
    if "json" in content_type or text[:1] in "{[":
        with contextlib.suppress(ValueError):
            return {"json": json.loads(text)}
    return {"text": text}


def body_bytes(record: dict[str, Any]) -> bytes:
    """The bytes of a body :func:`body_record` kept."""
    if "json" in record:
        return json.dumps(record["json"], separators=(",", ":"), ensure_ascii=False).encode()
    if "text" in record:
        return str(record["text"]).encode()
    if "base64" in record:
        return base64.b64decode(record["base64"])
    return b""


def request_record(method: str, url: str, body: bytes, content_type: str = "") -> dict[str, Any]:
    """A request as the cassette keeps it (no headers: they carry keys and vary per call)."""
    return {"method": method.upper(), "url": url, "body": body_record(body, content_type)}


def unalias(url: str, aliases: dict[str, str]) -> str:
    """``url`` as the forwarder it was sent to passes it on (:data:`ALIASES_ENV`): a local
    prefix replaced by its upstream, the rest (path tail, query) kept; else unchanged."""
    for local, upstream in aliases.items():
        local = local.rstrip("/")
        if url == local or url.startswith((local + "/", local + "?")):
            return upstream.rstrip("/") + url[len(local) :]
    return url


def canonical(request: dict[str, Any], rules: Rules) -> dict[str, Any]:
    """What a request is matched on: method, host, path (with its query) and the body after
    the volatile fields and the user's rules are scrubbed."""
    parts = urllib.parse.urlsplit(str(request.get("url", "")))
    path = parts.path or "/"
    if parts.query:
        path += "?" + "&".join(sorted(parts.query.split("&")))
    body = dict(request.get("body") or {})
    if "json" in body:
        value = body["json"]
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in VOLATILE_FIELDS}
        for field in rules.fields:
            value = _drop(value, field)
        body = {"json": _scrub_strings(value, rules)}
    elif "text" in body:
        body = {"text": rules.text(str(body["text"]))}
    elif "base64" in body:
        body = {"sha256": hashlib.sha256(body_bytes(body)).hexdigest()}
    return {
        "method": str(request.get("method", "")).upper(),
        "host": parts.netloc.lower(),
        "path": rules.text(path),
        "body": body,
    }


def request_key(request: dict[str, Any], rules: Rules) -> str:
    """The canonical request as one string: equal keys match."""
    return json.dumps(canonical(request, rules), sort_keys=True, ensure_ascii=False)


def response_headers(headers: Any) -> dict[str, str]:
    """The response headers a cassette keeps (:data:`KEPT_RESPONSE_HEADERS`)."""
    kept: dict[str, str] = {}
    for name, value in _header_items(headers):
        if name.lower() in KEPT_RESPONSE_HEADERS:
            kept[name.lower()] = value
    return kept


def _header_items(headers: Any) -> list[tuple[str, str]]:
    items = headers.items() if hasattr(headers, "items") else headers
    out = []
    for name, value in items:
        name = name.decode("latin-1") if isinstance(name, bytes) else str(name)
        value = value.decode("latin-1") if isinstance(value, bytes) else str(value)
        out.append((name, value))
    return out


class ChunkRecorder:
    """A response body as the chunks its transport delivered, boundaries exact: as text when
    every chunk is UTF-8 on its own, else (a binary body, or a chunk that splits a multi-byte
    character) as base64, so a replay delivers the very same chunks."""

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.raw: list[bytes] = []
        self.binary = False
        self.size = 0

    def add(self, chunk: bytes) -> None:
        self.raw.append(chunk)
        self.size += len(chunk)
        if not self.binary:
            try:
                self.chunks.append(chunk.decode("utf-8"))
            except UnicodeDecodeError:
                self.binary = True

    def record(self) -> dict[str, Any]:
        """``{"chunks": [...]}`` or ``{"base64_chunks": [...]}``."""
        if not self.binary:
            return {"chunks": [c for c in self.chunks if c]}
        return {"base64_chunks": [base64.b64encode(c).decode("ascii") for c in self.raw if c]}


def response_chunks(response: dict[str, Any]) -> list[bytes]:
    """The body chunks of a recorded response, as bytes."""
    if "base64_chunks" in response:
        return [base64.b64decode(c) for c in response["base64_chunks"]]
    return [str(c).encode() for c in response.get("chunks", ())]


def response_record(
    status: int, headers: Any, recorder: ChunkRecorder, decoded: bool = False
) -> dict[str, Any]:
    """A response as the cassette keeps it; ``decoded``: the library already undid any
    content encoding (aiohttp, requests), so the header would lie about the body."""
    kept = response_headers(headers)
    if decoded:
        kept.pop("content-encoding", None)
    return {"status": int(status), "headers": kept, **recorder.record()}


def miss_response(reason: str) -> dict[str, Any]:
    """What a replay miss answers: an HTTP 400 no client retries, naming the miss."""
    body = {"error": {"message": f"lk-eval replay miss: {reason}", "type": "lkeval_replay_miss"}}
    return {
        "status": MISS_STATUS,
        "headers": {"content-type": "application/json"},
        "chunks": [json.dumps(body)],
    }


# --- one divergence per attempt ------------------------------------------------------------------


def raise_flag(path: str, reason: str) -> None:
    """Say, once per attempt, that one of its clients left the recording: a file the other
    clients (lk-eval's, and the agent's in its own process) look for before each request, so
    that from the first divergence the whole conversation is live."""
    with contextlib.suppress(FileExistsError, OSError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(reason[:500])


def read_flag(path: str) -> str:
    """Why another client of the attempt left the recording ("" while none has)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read() or "another client of this attempt left the recording"
    except OSError:
        return ""


# --- the tape -------------------------------------------------------------------------------------


class Call:
    """One request's fate: ``recorded`` (replay it), ``miss`` (refuse it), or live."""

    def __init__(self, number: int, request: dict[str, Any], concurrent: list[int]) -> None:
        self.number = number
        self.request = request
        #: The calls of this client still in flight when this one started (recorded with the
        #: exchange: only these may be replayed in another order).
        self.concurrent = concurrent
        self.recorded: dict[str, Any] | None = None
        self.miss: str | None = None

    @property
    def live(self) -> bool:
        return self.recorded is None and self.miss is None


class Tape:
    """One client's exchanges in one scenario attempt, and what happened to its requests.

    ``sink`` receives each event as a JSON-ready dict: ``{"exchange": ...}`` when a call
    completes (replayed or live; the new episode), ``{"live": ...}`` when auto mode goes live,
    ``{"miss": ...}`` at the first request replay mode refuses, ``{"overflow": ...}`` when the
    episode outgrew :data:`MAX_EPISODE_BYTES`. Thread-safe: tools call from threads.

    A request replays the first unused recorded exchange it equals, provided every recorded
    call before that one was made already or overlapped it when recorded (the order within a
    client is kept; parallel calls match in any order). The attempt's clients share one
    divergence: ``diverged`` says whether another client (or the agent's process) left the
    recording already, and then this tape goes live too at its next request; ``on_diverge``
    tells the others when this one does (docs/replay.md).
    """

    def __init__(
        self,
        client: str,
        mode: str,
        recorded: list[dict[str, Any]],
        rules: Rules,
        sink: Callable[[dict[str, Any]], None],
        refused: str = "",
        diverged: Callable[[], str] | None = None,
        on_diverge: Callable[[str], None] | None = None,
        aliases: dict[str, str] | None = None,
    ) -> None:
        self.client = client
        self.aliases = dict(aliases or {})
        #: Why the cassette was not used ("" when it was): what a miss says when there is
        #: nothing to replay because of it (another judge model, another format version).
        self.refused = refused
        self.mode = mode
        self.rules = rules
        self._recorded = list(recorded)
        self._keys = [request_key(e.get("request", {}), rules) for e in self._recorded]
        self._used = [False] * len(self._recorded)
        self._sink = sink
        self._lock = threading.Lock()
        self.calls = 0
        self.live = mode == "record"
        self.live_from: int | None = None
        self.reason = ""
        self.missed = False
        self._size = 0
        self._in_flight: set[int] = set()
        self._diverged = diverged
        self._on_diverge = on_diverge

    def begin(self, method: str, url: str, body: bytes, content_type: str = "") -> Call:
        """Decide what to do with one request (numbered in the order requests start)."""
        request = request_record(method, unalias(url, self.aliases), body, content_type)
        with self._lock:
            self.calls += 1
            call = Call(self.calls, request, sorted(self._in_flight))
            self._in_flight.add(call.number)
            if self.live:
                return call
            elsewhere = self._diverged() if self._diverged and self.mode == "auto" else ""
            if elsewhere:
                self._go_live(call, f"{self.client}'s call {call.number} is live: {elsewhere}")
                return call
            key = request_key(request, self.rules)
            found = self._take(key)
            if isinstance(found, dict):
                call.recorded = found
                return call
            why = found or self._explain(request, key)
            reason = f"replay miss at {self.client}'s call {call.number}: {why}"
            if self.mode == "replay":
                call.miss = reason
                if not self.missed:
                    self.missed, self.live_from, self.reason = True, call.number, reason
                    self._sink({"miss": {"call": call.number, "reason": reason}})
                    if self._on_diverge is not None:
                        self._on_diverge(reason)
                return call
            self._go_live(call, reason)
            return call

    def _go_live(self, call: Call, reason: str) -> None:
        self.live, self.live_from, self.reason = True, call.number, reason
        self._sink({"live": {"call": call.number, "reason": reason}})
        if self._on_diverge is not None:
            self._on_diverge(reason)

    def _take(self, key: str) -> dict[str, Any] | str:
        """The recorded exchange this request replays (marked used), or why none may be
        ("": none equals it). An equal one later in the recording may be taken only when every
        unused one before it overlapped it when recorded: otherwise a call the recording made
        first was skipped or moved (an agent that stopped making a side-effecting POST)."""
        skipped: list[int] = []
        for i, recorded_key in enumerate(self._keys):
            if self._used[i]:
                continue
            if recorded_key == key:
                overlapped = set(self._recorded[i].get("concurrent") or ())
                early = [j for j in skipped if self._recorded[j].get("call") not in overlapped]
                if early:
                    return self._out_of_order(i, early[0])
                self._used[i] = True
                return self._recorded[i]
            skipped.append(i)
        return ""

    def _out_of_order(self, taken: int, missing: int) -> str:
        was = self._recorded[missing].get("request", {})
        return (
            f"out of order: it is the recording's call {self._recorded[taken].get('call')}, "
            f"and the recording's call {self._recorded[missing].get('call')} "
            f"({str(was.get('method', '')).upper()} {was.get('url', '')}) was not made before it"
        )

    def finish(self, call: Call, response: dict[str, Any]) -> None:
        """A call completed with ``response`` (recorded or live): one exchange of the episode."""
        with self._lock:
            self._in_flight.discard(call.number)
        if call.miss is not None:
            return
        exchange = {
            "call": call.number,
            "replayed": call.recorded is not None,
            "request": call.request,
            "response": response,
        }
        if call.concurrent:
            exchange["concurrent"] = call.concurrent
        size = len(json.dumps(exchange, ensure_ascii=False))
        with self._lock:
            self._size += size
            if self._size > MAX_EPISODE_BYTES:
                self._sink({"overflow": {"call": call.number, "bytes": self._size}})
                return
        self._sink({"exchange": exchange})

    def _explain(self, request: dict[str, Any], key: str) -> str:
        """The first differing field against the nearest recorded request, with a short diff."""
        unused = [i for i, used in enumerate(self._used) if not used]
        if not self._recorded:
            return self.refused or "nothing was recorded for this client"
        if not unused:
            return f"the recording has no more calls (it made {len(self._recorded)})"
        now = canonical(request, self.rules)
        same_route = [
            i
            for i in unused
            if _route(canonical(self._recorded[i].get("request", {}), self.rules)) == _route(now)
        ]
        nearest = (same_route or unused)[0]
        was = canonical(self._recorded[nearest].get("request", {}), self.rules)
        found = first_difference(_flat(was), _flat(now))
        return found or "the request differs"


def _flat(request: dict[str, Any]) -> dict[str, Any]:
    """A canonical request with its body unwrapped, so a difference reads ``body.messages``."""
    body = request["body"]
    return {**request, "body": next(iter(body.values())) if len(body) == 1 else body}


def _route(request: dict[str, Any]) -> tuple[str, str, str]:
    return request["method"], request["host"], request["path"]


def first_difference(was: Any, now: Any, where: str = "") -> str | None:
    """``body.messages[0].content: recorded '…' , sent '…'`` for the first field that differs
    (keys in sorted order, list items in order), or None when equal."""
    if isinstance(was, dict) and isinstance(now, dict):
        for key in sorted(set(was) | set(now)):
            here = f"{where}.{key}" if where else str(key)
            if key not in was:
                return f"{here}: not in the recorded request, sent {_show(now[key])}"
            if key not in now:
                return f"{here}: recorded {_show(was[key])}, not sent"
            found = first_difference(was[key], now[key], here)
            if found:
                return found
        return None
    if isinstance(was, list) and isinstance(now, list):
        for i, (a, b) in enumerate(zip(was, now, strict=False)):
            found = first_difference(a, b, f"{where}[{i}]")
            if found:
                return found
        if len(was) != len(now):
            return f"{where}: recorded {len(was)} items, sent {len(now)}"
        return None
    if was == now:
        return None
    if isinstance(was, str) and isinstance(now, str):
        return f"{where}: recorded {_excerpt(was, now)}"
    return f"{where}: recorded {_show(was)}, sent {_show(now)}"


def _excerpt(was: str, now: str) -> str:
    """``'…same text OLD…', sent '…same text NEW…'`` around the first differing character."""
    start = 0
    while start < min(len(was), len(now)) and was[start] == now[start]:
        start += 1
    lo = max(0, start - _CONTEXT)

    def cut(text: str) -> str:
        piece = text[lo : start + _CONTEXT]
        return ("…" if lo else "") + piece + ("…" if start + _CONTEXT < len(text) else "")

    before, after = (json.dumps(cut(text), ensure_ascii=False) for text in (was, now))
    return f"{before}, sent {after}"


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 2 * _CONTEXT else text[: 2 * _CONTEXT] + "…"


__all__ = [
    "CLIENT_AGENT",
    "FORMAT_VERSION",
    "MODES",
    "TAPE_ENV",
    "TAPE_OUT_ENV",
    "Call",
    "ChunkRecorder",
    "Rules",
    "RulesError",
    "Tape",
    "canonical",
    "first_difference",
    "miss_response",
    "raise_flag",
    "read_flag",
    "request_key",
    "request_record",
    "response_chunks",
    "response_record",
]
