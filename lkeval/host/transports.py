"""The HTTP client libraries' transports, patched to record and replay through a tape.

Standard library only, like :mod:`lkeval.host.tape`: the agent host loads this file by path
into the agent's interpreter (``install_from_env``), and it loads its siblings ``tape.py`` and
``served.py`` the same way; lk-eval's own process imports them as modules. Whichever of
httpx, httpx2 (the OpenAI SDK's), aiohttp and requests are importable are patched once per
process at the one place each sends a request (``HTTPTransport.handle_request``,
``AsyncHTTPTransport.handle_async_request``, ``ClientSession._request``, ``HTTPAdapter.send``);
each request asks the registered resolvers for its tape and passes through untouched when none
claims it. Streams stay streams for httpx; aiohttp and requests responses are read whole and
served from the record (:mod:`lkeval.host.served`; in record mode too, so a tool sees the
same object either way).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, ClassVar

if __package__:  # imported as lkeval.host.transports (lk-eval's own process, tests)
    from . import served
    from . import tape as tp
else:  # loaded by path in the agent's interpreter, by the host's loader (siblings.py)
    tp = sys.modules["_lkeval_siblings"].sibling("tape")
    served = sys.modules["_lkeval_siblings"].sibling("served")

Resolve = Callable[[], "tp.Tape | None"]
_RESOLVERS = "_lkeval_tape_resolvers"


def install(resolve: Resolve) -> list[str]:
    """Register ``resolve`` on every HTTP client library (once per process): each request asks
    the registered resolvers for its tape, the first answer wins, and a request none claims
    passes through untouched. Returns the libraries covered.

    A library already imported is patched now; one that is not is patched the moment it is
    imported (:class:`_PatchOnImport`), never imported here: the agent host installs the tape
    before the agent's module is imported, and importing httpx for an agent that never uses it
    (its ``__init__`` imports ``rich`` and ``click`` for httpx's command line) was 0.07 s of
    the 0.39 s of CPU a replayed attempt's agent spent (``bench/replay_phases.py``)."""
    covered = []
    for name in _LIBRARIES:
        module = sys.modules.get(name)
        if module is not None:
            _LIBRARIES[name](module, resolve)
        elif _importable(name):
            _PatchOnImport.arm(name, resolve)
        else:
            continue
        covered.append(name.partition(".")[0])
    return covered


def uninstall(resolve: Resolve) -> None:
    """Stop asking ``resolve`` (the patches stay: they pass requests through)."""
    _PatchOnImport.disarm(resolve)
    for module_name, cls_name in _PATCHED_CLASS.items():
        with contextlib.suppress(AttributeError, ValueError):
            cls = getattr(sys.modules.get(module_name), cls_name)
            cls.__dict__[_RESOLVERS].remove(resolve)


def _httpx_library(module: Any, resolve: Resolve) -> None:
    _register(module.AsyncHTTPTransport, resolve, _httpx_patcher(module))


def _aiohttp_library(module: Any, resolve: Resolve) -> None:
    _register(module.ClientSession, resolve, lambda r: _patch_aiohttp(module, r))


def _requests_library(module: Any, resolve: Resolve) -> None:
    _register(module.HTTPAdapter, resolve, lambda r: _patch_requests(module, r))


# The module each library is patched in, and how; the class that holds its resolvers.
_LIBRARIES: dict[str, Callable[[Any, Resolve], None]] = {
    "httpx": _httpx_library,
    "httpx2": _httpx_library,
    "aiohttp": _aiohttp_library,
    "requests.adapters": _requests_library,
}
_PATCHED_CLASS = {
    "httpx": "AsyncHTTPTransport",
    "httpx2": "AsyncHTTPTransport",
    "aiohttp": "ClientSession",
    "requests.adapters": "HTTPAdapter",
}


def _importable(name: str) -> bool:
    """Whether the library's top-level package can be found (found, not imported)."""
    import importlib.util

    try:
        return importlib.util.find_spec(name.partition(".")[0]) is not None
    except (ImportError, ValueError):
        return False


class _PatchOnImport:
    """A ``sys.meta_path`` finder that patches an armed library right after it is imported:
    it finds the module through the other finders, and wraps the loader's ``exec_module`` for
    that one load (the module keeps its own loader). Removed once nothing is armed."""

    armed: ClassVar[dict[str, list[Resolve]]] = {}

    @classmethod
    def arm(cls, name: str, resolve: Resolve) -> None:
        waiting = cls.armed.setdefault(name, [])
        if resolve not in waiting:
            waiting.append(resolve)
        if not any(isinstance(f, cls) for f in sys.meta_path):
            sys.meta_path.insert(0, cls())

    @classmethod
    def disarm(cls, resolve: Resolve) -> None:
        for waiting in cls.armed.values():
            with contextlib.suppress(ValueError):
                waiting.remove(resolve)
        cls._tidy()

    @classmethod
    def _tidy(cls) -> None:
        for name in [n for n, waiting in cls.armed.items() if not waiting]:
            del cls.armed[name]
        if not cls.armed:
            sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, cls)]

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self.armed:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _PatchingLoader(spec.loader, fullname)
        return spec


class _PatchingLoader:
    """The real loader, plus the patch once the module has executed."""

    def __init__(self, real: Any, name: str) -> None:
        self._real = real
        self._name = name

    def create_module(self, spec: Any) -> Any:
        return self._real.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__loader__ = module.__spec__.loader = self._real  # the module sees its own
        self._real.exec_module(module)
        for resolve in _PatchOnImport.armed.pop(self._name, []):
            _LIBRARIES[self._name](module, resolve)
        _PatchOnImport._tidy()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _httpx_patcher(module: Any) -> Callable[[Resolve], None]:
    return lambda resolve: _patch_httpx(module, resolve)


def _register(cls: Any, resolve: Resolve, patch: Callable[[Resolve], None]) -> None:
    resolvers = cls.__dict__.get(_RESOLVERS)
    if resolvers is None:
        resolvers = []
        setattr(cls, _RESOLVERS, resolvers)

        def first() -> tp.Tape | None:
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


def _httpx_replayed(httpx: Any, tape: tp.Tape, call: tp.Call, request: Any, sync: bool) -> Any:
    response = call.recorded["response"] if call.recorded else tp.miss_response(call.miss or "")
    tape.finish(call, response)
    chunks = tp.response_chunks(response)
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

    def __init__(self, inner: Any, tape: tp.Tape, call: tp.Call, response: Any) -> None:
        self.inner = inner
        self.tape = tape
        self.call = call
        self.status = response.status_code
        self.headers = response.headers
        self.recorder = tp.ChunkRecorder()
        self.done = False

    def complete(self) -> None:
        if not self.done:
            self.done = True
            self.tape.finish(
                self.call, tp.response_record(self.status, self.headers, self.recorder)
            )


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
                call.recorded["response"] if call.recorded else tp.miss_response(call.miss or "")
            )
        else:
            live = await real(self, method, str_or_url, **kwargs)
            try:
                recorder = tp.ChunkRecorder()
                recorder.add(await live.read())
                response = tp.response_record(live.status, live.headers, recorder, decoded=True)
            finally:
                live.release()
        tape.finish(call, response)
        chunks = tp.response_chunks(response)
        return served.AiohttpResponse(aiohttp, method, url, response, chunks)

    session_cls._request = _request


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
                call.recorded["response"] if call.recorded else tp.miss_response(call.miss or "")
            )
        else:
            request.headers["accept-encoding"] = "identity"
            live = real(self, request, **kwargs)
            recorder = tp.ChunkRecorder()
            recorder.add(live.content)
            live.close()
            response = tp.response_record(live.status_code, live.headers, recorder, decoded=True)
        tape.finish(call, response)
        return served.requests_response(request, response, tp.response_chunks(response))

    adapter_cls.send = send


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


def install_from_env(environ: Any = None) -> tp.Tape | None:
    """In the agent process: the tape lk-eval handed over (``LKEVAL_TAPE``), installed on
    every HTTP client library; None when record/replay is off."""
    env = os.environ if environ is None else environ
    path, out = env.get(tp.TAPE_ENV), env.get(tp.TAPE_OUT_ENV)
    if not path or not out:
        return None
    with open(path, encoding="utf-8") as fh:
        spec = json.load(fh)
    sink = JsonLines(out)
    flag = spec.get("live_flag")
    tape = tp.Tape(
        tp.CLIENT_AGENT,
        str(spec.get("mode", "record")),
        list(spec.get("exchanges", ())),
        tp.Rules.from_json(spec.get("rules")),
        sink,
        diverged=(lambda: tp.read_flag(flag)) if flag else None,
        on_diverge=(lambda reason: tp.raise_flag(flag, reason)) if flag else None,
        aliases=_aliases(env.get(tp.ALIASES_ENV, "")),
    )
    sink({"installed": install(lambda: tape)})  # lk-eval refuses an attempt without this line
    return tape


def _aliases(text: str) -> dict[str, str]:
    """:data:`~lkeval.host.tape.ALIASES_ENV` as a mapping (lk-eval writes it; anything else
    is ignored rather than stop the agent: an unaliased URL only misses)."""
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): str(v) for k, v in data.items() if isinstance(v, str)}


__all__ = ["JsonLines", "install", "install_from_env", "uninstall"]
