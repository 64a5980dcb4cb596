"""Record and replay HTTP exchanges in whichever process runs it: the agent's, or lk-eval's own.

Standard library only, and importing nothing from lk-eval: the agent host loads this file by
path (like ``agents/agent_host.py``) into an agent interpreter that may have livekit-agents and
nothing of lk-eval's dependencies. It patches the transports of whichever of httpx (and its
successor httpx2, which the OpenAI SDK uses), aiohttp and requests are importable, so the
agent's LLM calls (the OpenAI SDK, LiveKit Inference, other providers' HTTP APIs) and its
tools' HTTP calls are all seen, without a proxy: a recording proxy cannot read HTTPS without a
MITM certificate the agent would have to trust, and vcrpy is not installed in the agent's venv
(docs/replay.md says more).

A :class:`Tape` is one client's exchanges (the agent's, or lk-eval's caller's or judge's) in one
scenario attempt. For each request it decides: replay a recorded exchange whose request matches
(:func:`request_key`: method, host, path and the canonical JSON body after scrubbing), go live
(record mode, or auto mode from the first request with no match), or refuse (replay mode: a
miss, answered with an HTTP 400 whose body names it; lk-eval ends the attempt as an error from
the tape's record of the miss, so a swallowed 400 can never pass). Streaming responses are kept
as the chunks the transport delivered, so SSE parsers see the same stream on replay.
"""

from __future__ import annotations

import base64
import codecs
import contextlib
import hashlib
import io
import json
import os
import re
import threading
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

FORMAT_VERSION = 1
CLIENT_AGENT = "agent"
TAPE_ENV = "LKEVAL_TAPE"
"""The agent's tape file: its recorded exchanges, the mode and the scrub rules (JSON)."""
TAPE_OUT_ENV = "LKEVAL_TAPE_OUT"
"""Where the agent appends what happened, one JSON object per line."""
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
    """A response body as the chunks its transport delivered, kept as text where it is UTF-8
    (a multi-byte character split between chunks moves to the next one), else base64."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self.chunks: list[str] = []
        self.raw: list[bytes] = []
        self.binary = False
        self.size = 0

    def add(self, chunk: bytes) -> None:
        self.raw.append(chunk)
        self.size += len(chunk)
        if not self.binary:
            try:
                text = self._decoder.decode(chunk)
            except UnicodeDecodeError:
                self.binary = True
                return
            if text:
                self.chunks.append(text)

    def record(self) -> dict[str, Any]:
        """``{"chunks": [...]}`` or ``{"base64_chunks": [...]}``."""
        if not self.binary:
            try:
                tail = self._decoder.decode(b"", final=True)
            except UnicodeDecodeError:
                self.binary = True
            else:
                return {"chunks": self.chunks + ([tail] if tail else [])}
        return {"base64_chunks": [base64.b64encode(c).decode("ascii") for c in self.raw]}


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


# --- the tape -------------------------------------------------------------------------------------


class Call:
    """One request's fate: ``recorded`` (replay it), ``miss`` (refuse it), or live."""

    def __init__(self, number: int, request: dict[str, Any]) -> None:
        self.number = number
        self.request = request
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
    """

    def __init__(
        self,
        client: str,
        mode: str,
        recorded: list[dict[str, Any]],
        rules: Rules,
        sink: Callable[[dict[str, Any]], None],
    ) -> None:
        self.client = client
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

    def begin(self, method: str, url: str, body: bytes, content_type: str = "") -> Call:
        """Decide what to do with one request (numbered in the order requests start)."""
        request = request_record(method, url, body, content_type)
        with self._lock:
            self.calls += 1
            call = Call(self.calls, request)
            if self.live:
                return call
            key = request_key(request, self.rules)
            for i, recorded_key in enumerate(self._keys):
                if not self._used[i] and recorded_key == key:
                    self._used[i] = True
                    call.recorded = self._recorded[i]
                    return call
            reason = (
                f"replay miss at {self.client}'s call {call.number}: {self._explain(request, key)}"
            )
            if self.mode == "replay":
                call.miss = reason
                if not self.missed:
                    self.missed, self.live_from, self.reason = True, call.number, reason
                    self._sink({"miss": {"call": call.number, "reason": reason}})
                return call
            self.live, self.live_from, self.reason = True, call.number, reason
            self._sink({"live": {"call": call.number, "reason": reason}})
            return call

    def finish(self, call: Call, response: dict[str, Any]) -> None:
        """A call completed with ``response`` (recorded or live): one exchange of the episode."""
        if call.miss is not None:
            return
        exchange = {
            "call": call.number,
            "replayed": call.recorded is not None,
            "request": call.request,
            "response": response,
        }
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
            return "nothing was recorded for this client"
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


# --- transports -----------------------------------------------------------------------------------

Resolve = Callable[[], "Tape | None"]
_RESOLVERS = "_lkeval_tape_resolvers"


def install(resolve: Resolve) -> list[str]:
    """Patch every importable HTTP client library (once per process) and register ``resolve``:
    each request asks the registered resolvers for its tape, the first answer wins, and a
    request none claims passes through untouched. Returns the libraries seen."""
    patched = []
    for name in ("httpx", "httpx2"):
        with contextlib.suppress(ImportError):
            module = __import__(name)
            _register(module.AsyncHTTPTransport, resolve, _httpx_patcher(module))
            patched.append(name)
    with contextlib.suppress(ImportError):
        import aiohttp

        _register(aiohttp.ClientSession, resolve, lambda r: _patch_aiohttp(aiohttp, r))
        patched.append("aiohttp")
    with contextlib.suppress(ImportError):
        import requests.adapters

        adapters = requests.adapters
        _register(adapters.HTTPAdapter, resolve, lambda r: _patch_requests(adapters, r))
        patched.append("requests")
    return patched


def uninstall(resolve: Resolve) -> None:
    """Stop asking ``resolve`` (the patches stay: they pass requests through)."""
    for module_name, cls_name in (
        ("httpx", "AsyncHTTPTransport"),
        ("httpx2", "AsyncHTTPTransport"),
        ("aiohttp", "ClientSession"),
        ("requests.adapters", "HTTPAdapter"),
    ):
        with contextlib.suppress(ImportError, AttributeError, ValueError):
            import importlib

            cls = getattr(importlib.import_module(module_name), cls_name)
            cls.__dict__[_RESOLVERS].remove(resolve)


def _httpx_patcher(module: Any) -> Callable[[Resolve], None]:
    return lambda resolve: _patch_httpx(module, resolve)


def _register(cls: Any, resolve: Resolve, patch: Callable[[Resolve], None]) -> None:
    resolvers = cls.__dict__.get(_RESOLVERS)
    if resolvers is None:
        resolvers = []
        setattr(cls, _RESOLVERS, resolvers)

        def first() -> Tape | None:
            for each in list(resolvers):
                tape = each()
                if tape is not None:
                    return tape
            return None

        patch(first)
    if resolve not in resolvers:
        resolvers.append(resolve)


def _patch_httpx(httpx: Any, resolve: Resolve) -> None:
    sync_cls, async_cls = httpx.HTTPTransport, httpx.AsyncHTTPTransport
    real_sync, real_async = sync_cls.handle_request, async_cls.handle_async_request

    def handle_request(self: Any, request: Any) -> Any:
        tape = resolve()
        if tape is None:
            return real_sync(self, request)
        call = tape.begin(
            request.method,
            str(request.url),
            request.read(),
            request.headers.get("content-type", ""),
        )
        if not call.live:
            return _httpx_replayed(httpx, tape, call, request, sync=True)
        request.headers["accept-encoding"] = "identity"
        response = real_sync(self, request)
        stream = _SyncRecording(response.stream, tape, call, response)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_httpx_stream(httpx, stream, sync=True),
            extensions=response.extensions,
            request=request,
        )

    async def handle_async_request(self: Any, request: Any) -> Any:
        tape = resolve()
        if tape is None:
            return await real_async(self, request)
        body = await request.aread()
        call = tape.begin(
            request.method, str(request.url), body, request.headers.get("content-type", "")
        )
        if not call.live:
            return _httpx_replayed(httpx, tape, call, request, sync=False)
        request.headers["accept-encoding"] = "identity"
        response = await real_async(self, request)
        stream = _AsyncRecording(response.stream, tape, call, response)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_httpx_stream(httpx, stream, sync=False),
            extensions=response.extensions,
            request=request,
        )

    sync_cls.handle_request = handle_request
    async_cls.handle_async_request = handle_async_request


_STREAM_CLASSES: dict[tuple[int, bool], type] = {}


def _httpx_stream(httpx: Any, inner: Any, sync: bool) -> Any:
    """``inner`` as the byte stream class httpx expects (sync or async)."""
    key = (id(httpx), sync)
    if key not in _STREAM_CLASSES:
        base = httpx.SyncByteStream if sync else httpx.AsyncByteStream

        class Stream(base):  # type: ignore[misc,valid-type]
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def __iter__(self) -> Iterator[bytes]:
                return iter(self.inner)

            def close(self) -> None:
                self.inner.close()

            def __aiter__(self) -> AsyncIterator[bytes]:
                return self.inner.__aiter__()

            async def aclose(self) -> None:
                await self.inner.aclose()

        _STREAM_CLASSES[key] = Stream
    return _STREAM_CLASSES[key](inner)


def _httpx_replayed(httpx: Any, tape: Tape, call: Call, request: Any, sync: bool) -> Any:
    response = call.recorded["response"] if call.recorded else miss_response(call.miss or "")
    tape.finish(call, response)
    chunks = response_chunks(response)
    return httpx.Response(
        int(response.get("status", 200)),
        headers=dict(response.get("headers", {})),
        stream=_httpx_stream(httpx, _Chunks(chunks), sync),
        request=request,
    )


class _Chunks:
    """Recorded chunks, served one by one (sync or async)."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.chunks)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk

    def close(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


class _Recording:
    """A live response's stream, recorded as it is read; the exchange is complete at close
    (a reader that stops early, as lk-eval's judge does once it has a verdict, records what
    it read: a replay then stops at the same place)."""

    def __init__(self, inner: Any, tape: Tape, call: Call, response: Any) -> None:
        self.inner = inner
        self.tape = tape
        self.call = call
        self.status = response.status_code
        self.headers = response.headers
        self.recorder = ChunkRecorder()
        self.done = False

    def complete(self) -> None:
        if not self.done:
            self.done = True
            self.tape.finish(self.call, response_record(self.status, self.headers, self.recorder))


class _SyncRecording(_Recording):
    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.inner:
            self.recorder.add(chunk)
            yield chunk

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            self.complete()


class _AsyncRecording(_Recording):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.recorder.add(chunk)
            yield chunk

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        finally:
            self.complete()


def _aiohttp_body(session: Any, kwargs: dict[str, Any]) -> tuple[bytes, str]:
    """The body ``ClientSession._request`` will send, for matching (not sent from here)."""
    if kwargs.get("json") is not None:
        serialize = getattr(session, "_json_serialize", json.dumps)
        return str(serialize(kwargs["json"])).encode(), "application/json"
    data = kwargs.get("data")
    if data is None:
        return b"", ""
    if isinstance(data, bytes):
        return data, ""
    if isinstance(data, str):
        return data.encode(), ""
    if isinstance(data, dict):
        return urllib.parse.urlencode(data).encode(), "application/x-www-form-urlencoded"
    return _opaque(data), ""


def _opaque(body: object) -> bytes:
    """A body that is a stream (a generator, a file, a form) as a stable stand-in for matching:
    its type, never its object address."""
    return f"<{type(body).__name__} body>".encode()


def _patch_aiohttp(aiohttp: Any, resolve: Resolve) -> None:
    session_cls = aiohttp.ClientSession
    real = session_cls._request

    async def _request(self: Any, method: str, str_or_url: Any, **kwargs: Any) -> Any:
        tape = resolve()
        headers = {str(k).lower(): str(v) for k, v in dict(kwargs.get("headers") or {}).items()}
        if tape is None or "upgrade" in headers:  # websockets are not HTTP exchanges
            return await real(self, method, str_or_url, **kwargs)
        url = self._build_url(str_or_url)
        if kwargs.get("params"):
            url = url.extend_query(kwargs["params"])
        body, content_type = _aiohttp_body(self, kwargs)
        call = tape.begin(method, str(url), body, headers.get("content-type", content_type))
        if not call.live:
            response = (
                call.recorded["response"] if call.recorded else miss_response(call.miss or "")
            )
        else:
            live = await real(self, method, str_or_url, **kwargs)
            try:
                recorder = ChunkRecorder()
                recorder.add(await live.read())
                response = response_record(live.status, live.headers, recorder, decoded=True)
            finally:
                live.release()
        tape.finish(call, response)
        return _AiohttpResponse(aiohttp, method, url, response)

    session_cls._request = _request


class _AiohttpResponse:
    """What an aiohttp caller reads of a response, served from a recorded one (in record mode
    too, so a tool sees the same object either way): status, headers, the body by ``read``,
    ``text``, ``json`` or the ``content`` stream, ``raise_for_status``, and the context manager."""

    def __init__(self, aiohttp: Any, method: str, url: Any, response: dict[str, Any]) -> None:
        from multidict import CIMultiDict, CIMultiDictProxy

        self._aiohttp = aiohttp
        self.method = method.upper()
        self.url = self.real_url = url
        self.status = int(response.get("status", 200))
        self.reason = _REASONS.get(self.status, "")
        self.headers = CIMultiDictProxy(CIMultiDict(response.get("headers", {})))
        self._chunks = response_chunks(response)
        self._body = b"".join(self._chunks)
        self.history: tuple[Any, ...] = ()
        self.closed = True
        self.connection = None
        self.request_info = aiohttp.RequestInfo(
            url, self.method, CIMultiDictProxy(CIMultiDict()), url
        )
        self._content: Any = None

    @property
    def ok(self) -> bool:
        return self.status < 400

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "application/octet-stream").split(";")[0].strip()

    @property
    def charset(self) -> str | None:
        match = re.search(r"charset=([\w-]+)", self.headers.get("content-type", ""))
        return match.group(1) if match else None

    @property
    def content_length(self) -> int:
        return len(self._body)

    @property
    def content(self) -> Any:
        if self._content is None:
            import asyncio

            reader = self._aiohttp.StreamReader(
                _NoProtocol(), 2**30, loop=asyncio.get_running_loop()
            )
            for chunk in self._chunks:
                reader.feed_data(chunk)
            reader.feed_eof()
            self._content = reader
        return self._content

    async def read(self) -> bytes:
        return self._body

    async def text(self, encoding: str | None = None, errors: str = "strict") -> str:
        return self._body.decode(encoding or self.charset or "utf-8", errors)

    async def json(self, *, loads: Callable[[str], Any] = json.loads, **_: Any) -> Any:
        text = self._body.decode(self.charset or "utf-8").strip()
        return loads(text) if text else None

    def get_encoding(self) -> str:
        return self.charset or "utf-8"

    def raise_for_status(self) -> None:
        if self.status >= 400:
            raise self._aiohttp.ClientResponseError(
                self.request_info,
                self.history,
                status=self.status,
                message=self.reason,
                headers=self.headers,
            )

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass

    async def wait_for_close(self) -> None:
        pass

    async def __aenter__(self) -> _AiohttpResponse:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass


class _NoProtocol:
    """The protocol a fed ``StreamReader`` asks to pause and resume: nothing to pause."""

    _reading_paused = False

    def pause_reading(self, *args: Any, **kwargs: Any) -> None:
        pass

    def resume_reading(self, *args: Any, **kwargs: Any) -> None:
        pass


_REASONS = {200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 404: "Not Found"}


def _patch_requests(adapters: Any, resolve: Resolve) -> None:
    adapter_cls = adapters.HTTPAdapter
    real = adapter_cls.send

    def send(self: Any, request: Any, **kwargs: Any) -> Any:
        tape = resolve()
        if tape is None:
            return real(self, request, **kwargs)
        body = request.body or b""
        if isinstance(body, str):
            body = body.encode()
        elif not isinstance(body, bytes):
            body = _opaque(body)
        call = tape.begin(
            request.method, request.url, body, request.headers.get("content-type", "")
        )
        if not call.live:
            response = (
                call.recorded["response"] if call.recorded else miss_response(call.miss or "")
            )
        else:
            request.headers["accept-encoding"] = "identity"
            live = real(self, request, **kwargs)
            recorder = ChunkRecorder()
            recorder.add(live.content)
            live.close()
            response = response_record(live.status_code, live.headers, recorder, decoded=True)
        tape.finish(call, response)
        return _requests_response(request, response)

    adapter_cls.send = send


def _requests_response(request: Any, response: dict[str, Any]) -> Any:
    """A ``requests.Response`` from a recorded one (in record mode too, as for aiohttp)."""
    import requests
    from requests.structures import CaseInsensitiveDict
    from requests.utils import get_encoding_from_headers

    out = requests.Response()
    out.status_code = int(response.get("status", 200))
    out.headers = CaseInsensitiveDict(response.get("headers", {}))
    out._content = b"".join(response_chunks(response))
    out._content_consumed = True
    out.raw = io.BytesIO(out._content)
    out.url = request.url
    out.request = request
    out.reason = _REASONS.get(out.status_code, "")
    out.encoding = get_encoding_from_headers(out.headers)
    return out


# --- the agent's side -----------------------------------------------------------------------------


class JsonLines:
    """The agent's events, appended to its tape's out file one line each (flushed: lk-eval
    reads the file while the agent runs, and after it was killed)."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._lock = threading.Lock()

    def __call__(self, event: dict[str, Any]) -> None:
        line = json.dumps(event, ensure_ascii=False, sort_keys=True) + "\n"
        with self._lock, open(self._path, "a", encoding="utf-8") as fh:
            fh.write(line)


def install_from_env(environ: Any = None) -> Tape | None:
    """In the agent process: the tape lk-eval handed over (``LKEVAL_TAPE``), installed on
    every HTTP client library; None when record/replay is off."""
    env = os.environ if environ is None else environ
    path, out = env.get(TAPE_ENV), env.get(TAPE_OUT_ENV)
    if not path or not out:
        return None
    with open(path, encoding="utf-8") as fh:
        spec = json.load(fh)
    sink = JsonLines(out)
    tape = Tape(
        CLIENT_AGENT,
        str(spec.get("mode", "record")),
        list(spec.get("exchanges", ())),
        Rules.from_json(spec.get("rules")),
        sink,
    )
    sink({"installed": install(lambda: tape)})  # lk-eval refuses an attempt without this line
    return tape


__all__ = [
    "CLIENT_AGENT",
    "FORMAT_VERSION",
    "MODES",
    "TAPE_ENV",
    "TAPE_OUT_ENV",
    "Rules",
    "RulesError",
    "Tape",
    "canonical",
    "first_difference",
    "install",
    "install_from_env",
    "request_key",
    "uninstall",
]
