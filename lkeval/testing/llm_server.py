"""A scripted, OpenAI-compatible chat-completions server on 127.0.0.1.

Why a real HTTP server rather than a mock: the agent under test talks to its LLM through
livekit-plugins-openai and the ``openai`` SDK, in another process. Pointing OPENAI_BASE_URL
at this server exercises the same wire format, streaming parser, retries and timeouts as
production, while the answers come from rules (see :mod:`lkeval.testing.llm_rules`), so
tests are deterministic and the shipped example runs with no API key.

Standard library only (plus PyYAML for rule files), so it can run anywhere lk-eval runs::

    rules = [{"last_user": "weather", "tool_calls": [{"name": "get_weather"}]}]
    with LLMServer(rules) as srv:
        os.environ["OPENAI_BASE_URL"] = srv.base_url

or from a shell: ``python -m lkeval.testing.llm_server --rules rules.yaml --url-file url.txt``.

Besides the rules, ``quirks=`` (a rules file's ``server:`` mapping) makes it behave like a real
third-party server (llama.cpp's ``llama-server``): see :mod:`lkeval.testing.llm_quirks` and
docs/testing.md, which lists every rule key and quirk. It also answers LiveKit Inference's
path (``LIVEKIT_INFERENCE_URL`` = ``base_url``): ``GET /models`` and ``/chat/completions``
with a bearer JWT, which it records but does not verify.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from lkeval.testing import llm_wire as wire
from lkeval.testing.llm_quirks import ServerQuirks, parse_quirks
from lkeval.testing.llm_rules import Reply, RuleBook, RuleError, load_rules, read_rules_config

__all__ = [
    "LLMServer",
    "QuietHTTPServer",
    "RecordedRequest",
    "RuleError",
    "ServerQuirks",
    "load_rules",
    "main",
]

HOST = "127.0.0.1"
DEFAULT_MODEL = "lkeval-scripted"
log = logging.getLogger("lkeval.testing.llm_server")


@dataclass(frozen=True)
class RecordedRequest:
    """One chat-completions request as received, for assertions in tests."""

    path: str
    authorization: str | None
    body: dict[str, Any]
    #: Every request header, names lower-cased (e.g. ``x-livekit-inference-priority``).
    headers: dict[str, str] = field(default_factory=dict)


class QuietHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server that, like a real one, logs nothing when a client resets.

    A client that resets or drops its connection (a cancelled ask, a closed pool) is normal
    traffic; socketserver would print a traceback to stderr, where a test's no-noise guard
    reads it as lk-eval's. The test doubles of other services (GitHub, a rooms API) use it too.
    """

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet for a client's reset; anything else (a bug in a handler) still prints."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _HTTPServer(QuietHTTPServer):
    block_on_close = False  # a hanging handler must never block stop()
    owner: LLMServer


class _Handler(BaseHTTPRequestHandler):
    """Routes the two OpenAI endpoints, with or without the ``/v1`` prefix."""

    protocol_version = "HTTP/1.1"  # keep-alive, as the openai SDK's httpx pool expects
    # Without TCP_NODELAY every request after the first on a kept-alive connection waits
    # ~40 ms for delayed ACKs (44 ms measured against 1.3 ms with it).
    disable_nagle_algorithm = True
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: request logs would drown test and eval output."""

    def _route(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/")
        return path[3:] if path.startswith("/v1/") else path

    def _send_json(
        self, status: int, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        """``GET /v1/models``: some clients probe it before their first request."""
        if self._route() != "/models":
            self._send_json(404, wire.error_body(404, f"no route GET {self.path}"))
            return
        names = [DEFAULT_MODEL, *self.server.owner.rules.model_names()]
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "lkeval"} for n in names]
        self._send_json(200, {"object": "list", "data": data})

    def do_POST(self) -> None:
        """``POST /v1/chat/completions``: pick a rule's reply and send it, streamed or not."""
        owner = self.server.owner
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self._route() != "/chat/completions":
            self._send_json(404, wire.error_body(404, f"no route POST {self.path}"))
            return
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._send_json(400, wire.error_body(400, "request body must be a JSON object"))
            return
        headers = {name.lower(): value for name, value in self.headers.items()}
        owner._record(RecordedRequest(self.path, self.headers.get("Authorization"), body, headers))
        seen, warning = owner.quirks.effective_request(body)
        if warning:
            owner._warn(warning)
        reply = owner.quirks.shape(owner.rules.pick(seen), seen)
        delay = owner.quirks.delay + reply.delay
        if reply.hang or (delay and owner._stopping.wait(delay)):
            owner._stopping.wait()  # released by stop(); then drop the connection unanswered
            self.close_connection = True
            return
        try:
            self._answer(body, reply)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (e.g. its timeout)
            self.close_connection = True

    def _answer(self, body: dict[str, Any], reply: Reply) -> None:
        if reply.status:
            headers = {"Retry-After": "0"} if reply.status == 429 else {}
            if reply.retry_after is not None:
                headers = {
                    "Retry-After": f"{reply.retry_after:g}",
                    "retry-after-ms": f"{reply.retry_after * 1000:g}",
                }
            self._send_json(reply.status, wire.error_body(reply.status, reply.text), headers)
            return
        model = str(body.get("model") or DEFAULT_MODEL)
        prompt_tokens = wire.tokens(json.dumps(body.get("messages", [])))
        limit = wire.max_tokens(body)
        if reply.ramble:
            reply = wire.rambled(reply, limit)
        if not body.get("stream"):
            self._answer_whole(reply, model, prompt_tokens, limit)
            return
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        include_usage = include_usage and self.server.owner.quirks.usage != "omit"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        timings = self.server.owner.quirks.timings
        maker = wire.ChunkMaker(model, include_usage, timings)
        if reply.stream_error is not None:
            self._send_events(wire.partial_then_error(maker, reply), done=False)
        elif reply.pad and limit is not None:
            self._send_events(wire.padded(maker, reply, prompt_tokens, limit), done=True)
        elif reply.ramble and limit is None:
            self._send_events(wire.endless(maker, reply.text or ""), done=False)
        else:
            chunks = wire.stream_chunks(
                reply, model, prompt_tokens, include_usage, with_timings=timings
            )
            if reply.ramble:  # cut at max_tokens
                chunks = (wire.as_length(c) for c in chunks)
            self._send_events(chunks, done=True)
        self.wfile.write(b"0\r\n\r\n")

    def _answer_whole(
        self, reply: Reply, model: str, prompt_tokens: int, limit: int | None
    ) -> None:
        """A non-streamed answer; a stream error is llama.cpp's HTTP 500, endless ramble hangs."""
        if reply.stream_error is not None:
            self._send_json(500, wire.stream_error_event(reply.stream_error))
            return
        if reply.ramble and limit is None:
            self.server.owner._stopping.wait()  # generates until the client's timeout
            self.close_connection = True
            return
        if reply.pad and limit is not None:
            reply = replace(reply, text=wire.padded_text(reply.text or "", limit))
        finish = "length" if reply.ramble or (reply.pad and limit is not None) else None
        body = wire.completion_body(
            reply,
            model,
            prompt_tokens,
            finish=finish,
            with_timings=self.server.owner.quirks.timings,
        )
        self._send_json(200, body)

    def _send_events(self, chunks: Iterable[Mapping[str, Any]], done: bool) -> None:
        """Write each chunk as an SSE ``data:`` event (and ``[DONE]``) in its own HTTP chunk."""
        events: Iterator[str] = (f"data: {json.dumps(c)}\n\n" for c in chunks)
        for event in events:
            if self.server.owner._stopping.is_set():
                raise BrokenPipeError("server stopping")
            data = event.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        if done:
            data = b"data: [DONE]\n\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))


class LLMServer:
    """A scripted OpenAI-compatible LLM on ``127.0.0.1``, served from a daemon thread.

    ``base_url`` ends in ``/v1`` (what OPENAI_BASE_URL expects). Every chat request is kept in
    ``requests``. Rules can be changed while it runs with :meth:`set_rules` / :meth:`add_rule`.
    """

    def __init__(
        self,
        rules: Iterable[Mapping[str, Any]] = (),
        *,
        default_text: str = "OK.",
        port: int = 0,
        quirks: ServerQuirks | Mapping[str, Any] | None = None,
    ) -> None:
        self.rules = RuleBook(rules, default_text)
        self.quirks = quirks if isinstance(quirks, ServerQuirks) else parse_quirks(quirks)
        self._warnings: list[str] = []
        self._port = port
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []

    @classmethod
    def from_file(
        cls, path: str | Path, *, default_text: str | None = None, port: int = 0
    ) -> LLMServer:
        """A server scripted by a YAML/JSON rules file (its ``default_text`` unless overridden)."""
        rules, file_default, server = read_rules_config(path)
        return cls(
            rules,
            default_text=default_text or file_default or "OK.",
            port=port,
            quirks=parse_quirks(server, f"{path}: server"),
        )

    @property
    def port(self) -> int:
        """The bound port (the real one when constructed with port 0)."""
        if self._httpd is None:
            raise RuntimeError("LLMServer is not running; call start() or use it as a context")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, for OPENAI_BASE_URL or ``openai.LLM(base_url=...)``."""
        return f"http://{HOST}:{self.port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the chat requests received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def warnings(self) -> list[str]:
        """The lines the server logged about requests (e.g. llama.cpp's tool_choice warning)."""
        with self._lock:
            return list(self._warnings)

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _warn(self, line: str) -> None:
        """Log ``line`` as the real server would, and keep it for tests."""
        with self._lock:
            self._warnings.append(line)
        log.warning("%s", line)

    def set_rules(self, rules: Iterable[Mapping[str, Any]]) -> None:
        """Replace the script; raises :class:`RuleError` (and keeps the old one) if malformed."""
        self.rules.set_rules(rules)

    def add_rule(self, rule: Mapping[str, Any]) -> None:
        """Append one rule to the script."""
        self.rules.add_rule(rule)

    def start(self) -> LLMServer:
        """Bind and serve in a daemon thread; returns self so ``LLMServer(...).start()`` chains."""
        if self._httpd is not None:
            raise RuntimeError("LLMServer already started")
        self._stopping.clear()
        httpd = _HTTPServer((HOST, self._port), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"lkeval-llm-server:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release hanging/delayed requests; safe to call twice."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """Serve a rules file until SIGTERM/SIGINT; exit 2 with one line if the file is bad."""
    parser = argparse.ArgumentParser(
        prog="python -m lkeval.testing.llm_server",
        description="Scripted OpenAI-compatible chat-completions server on 127.0.0.1.",
    )
    parser.add_argument("--rules", help="YAML/JSON rules file (a list, or {rules: [...]})")
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: any free)")
    parser.add_argument("--url-file", help="also write the base URL to this file")
    parser.add_argument("--default-text", help='reply when no rule matches (default "OK.")')
    args = parser.parse_args(argv)
    try:
        server = (
            LLMServer.from_file(args.rules, default_text=args.default_text, port=args.port)
            if args.rules
            else LLMServer(default_text=args.default_text or "OK.", port=args.port)
        )
        server.start()
    except RuleError as e:
        print(f"error: bad rules file {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: cannot listen on {HOST}:{args.port}: {e.strerror or e}", file=sys.stderr)
        return 2
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        if args.url_file:  # write-then-rename, so a poller never reads half a URL
            tmp = Path(f"{args.url_file}.{os.getpid()}.tmp")
            tmp.write_text(server.base_url, encoding="utf-8")
            os.replace(tmp, args.url_file)
        print(f"listening on {server.base_url}", flush=True)
        while not done.wait(0.2):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
