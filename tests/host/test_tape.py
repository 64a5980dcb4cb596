"""The recorder in every HTTP client path, both ways: record against a real local server, stop
it, replay from the recording alone and get the same bytes; and what a miss says."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import aiohttp
import httpx
import httpx2
import pytest
import requests

from lkeval.host import tape as tp
from lkeval.host import transports
from lkeval.testing.llm_server import QuietHTTPServer

SSE = [
    b'data: {"n": 1, "text": "caf\xc3',
    b'\xa9"}\n\n',
    b'data: {"n": 2}\n\n',
    b"data: [DONE]\n\n",
]


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._answer(b"")

    def do_POST(self) -> None:
        self._answer(self.rfile.read(int(self.headers.get("content-length") or 0)))

    def _answer(self, body: bytes) -> None:
        if self.path.startswith("/sse"):
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("set-cookie", "session=SECRET")
            self.end_headers()
            for chunk in SSE:
                self.wfile.write(chunk)
                self.wfile.flush()
                time.sleep(0.01)
            return
        answer = json.dumps({"path": self.path, "got": body.decode() or None}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    srv = QuietHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


class _Active:
    tape: tp.Tape | None = None


ACTIVE = _Active()


@pytest.fixture(autouse=True, scope="module")
def _installed() -> Iterator[None]:
    def resolve() -> tp.Tape | None:
        return ACTIVE.tape

    transports.install(resolve)
    yield
    transports.uninstall(resolve)


def _tape(
    mode: str, recorded: list[dict[str, Any]], rules: tp.Rules | None = None
) -> tuple[tp.Tape, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    tape = tp.Tape("agent", mode, recorded, rules or tp.Rules(), events.append)
    ACTIVE.tape = tape
    return tape, events


def _exchanges(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["exchange"] for e in events if "exchange" in e]


def _both_ways(server: ThreadingHTTPServer, use: Callable[[str], Any]) -> tuple[Any, Any]:
    """``use(base_url)`` recorded live, then replayed with the server gone."""
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        _, events = _tape("record", [])
        live = use(base)
        recorded = _exchanges(events)
        server.shutdown()
        server.server_close()
        tape, events = _tape("replay", recorded)
        again = use(base)
    finally:
        ACTIVE.tape = None
    assert not tape.missed and tape.calls == len(recorded) > 0
    assert all(e["replayed"] for e in _exchanges(events))
    return live, again


@pytest.mark.parametrize("module", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_httpx_sync_json(server: ThreadingHTTPServer, module: Any) -> None:
    def use(base: str) -> Any:
        with module.Client() as client:
            return client.post(f"{base}/a?x=1", json={"q": "hi"}).json()

    live, again = _both_ways(server, use)
    assert live == again == {"path": "/a?x=1", "got": '{"q":"hi"}'}


@pytest.mark.parametrize("module", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_httpx_sync_streaming_keeps_the_chunks(server: ThreadingHTTPServer, module: Any) -> None:
    def use(base: str) -> Any:
        with module.Client() as client, client.stream("POST", f"{base}/sse", json={}) as resp:
            return [chunk for chunk in resp.iter_raw()]

    live, again = _both_ways(server, use)
    assert b"".join(live) == b"".join(SSE) and again == live


@pytest.mark.parametrize("module", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_httpx_async_streaming_keeps_the_chunks(server: ThreadingHTTPServer, module: Any) -> None:
    def use(base: str) -> Any:
        async def go() -> list[bytes]:
            async with (
                module.AsyncClient() as client,
                client.stream("POST", f"{base}/sse", json={"stream": True}) as resp,
            ):
                return [chunk async for chunk in resp.aiter_raw()]

        return asyncio.run(go())

    live, again = _both_ways(server, use)
    assert b"".join(live) == b"".join(SSE)
    assert again == live  # the same chunks, boundaries as the transport delivered them


def test_aiohttp(server: ThreadingHTTPServer) -> None:
    def use(base: str) -> Any:
        async def go() -> tuple[Any, list[bytes]]:
            async with aiohttp.ClientSession() as session:
                async with session.get(f"{base}/tool", params={"room": "double"}) as resp:
                    resp.raise_for_status()
                    data = await resp.json()
                async with session.post(f"{base}/sse", json={"a": 1}) as resp:
                    lines = [line async for line in resp.content]
                return data, lines

        return asyncio.run(go())

    live, again = _both_ways(server, use)
    assert live == again and live[0] == {"path": "/tool?room=double", "got": None}


def test_requests(server: ThreadingHTTPServer) -> None:
    def use(base: str) -> Any:
        resp = requests.post(f"{base}/book", data="guest=Ann", timeout=5)
        resp.raise_for_status()
        return resp.json(), resp.headers.get("content-type")

    live, again = _both_ways(server, use)
    assert live == again and live[0]["got"] == "guest=Ann"


def test_requests_streaming_sse(server: ThreadingHTTPServer) -> None:
    """requests reads a stream whole (docs/replay.md): the lines an SSE reader gets are the
    same either way."""

    def use(base: str) -> Any:
        with requests.post(f"{base}/sse", json={"stream": True}, stream=True, timeout=5) as resp:
            return [line for line in resp.iter_lines() if line]

    live, again = _both_ways(server, use)
    assert live == again and live[-1] == b"data: [DONE]"


def test_an_unrecorded_client_goes_live_and_its_answer_is_matched_downstream(
    server: ThreadingHTTPServer,
) -> None:
    """urllib (like http.client, gRPC and websockets) is not recorded: in every mode it goes
    to the network, never to the cassette. With its server gone on replay it fails as the
    network fails, and what it returned reaches the conversation only through the agent's
    next LLM request, which is matched: a miss, never a silent pass."""
    base = f"http://127.0.0.1:{server.server_address[1]}"

    def turn() -> Any:
        try:
            with urllib.request.urlopen(f"{base}/rooms", timeout=5) as resp:
                tool = resp.read().decode()
        except urllib.error.URLError as exc:
            tool = f"error: {exc.reason}"
        with httpx.Client() as client:
            return client.post(f"{base}/v1/chat", json={"tool_output": tool})

    try:
        _, events = _tape("record", [])
        assert turn().status_code == 200
        recorded = _exchanges(events)
        assert [e["request"]["url"] for e in recorded] == [f"{base}/v1/chat"]  # not /rooms
        server.shutdown()
        server.server_close()
        tape, events = _tape("replay", recorded)
        answer = turn()
    finally:
        ACTIVE.tape = None
    assert answer.status_code == 400 and "lk-eval replay miss" in answer.text
    assert tape.missed and "body.tool_output: recorded" in tape.reason, tape.reason


def test_cassettes_keep_no_cookie_or_volatile_header(server: ThreadingHTTPServer) -> None:
    base = f"http://127.0.0.1:{server.server_address[1]}"
    _, events = _tape("record", [])
    try:
        with httpx.Client() as client:
            client.post(
                f"{base}/sse", json={}, headers={"authorization": "Bearer sk-SECRET"}
            ).read()
    finally:
        ACTIVE.tape = None
    text = json.dumps(events)
    assert "SECRET" not in text and "set-cookie" not in text and "date" not in text


def test_replay_miss_names_the_call_and_the_first_difference(server: ThreadingHTTPServer) -> None:
    base = f"http://127.0.0.1:{server.server_address[1]}"
    body = {"model": "m", "messages": [{"role": "system", "content": "Be brief and kind."}]}
    _, events = _tape("record", [])
    with httpx.Client() as client:
        client.post(f"{base}/v1/chat", json={"model": "m", "messages": []}).read()
        client.post(f"{base}/v1/chat", json=body).read()
    recorded = _exchanges(events)
    changed = {"model": "m", "messages": [{"role": "system", "content": "Be very brief and kind."}]}
    tape, events = _tape("replay", recorded)
    try:
        with httpx.Client() as client:
            client.post(f"{base}/v1/chat", json={"model": "m", "messages": []}).read()
            resp = client.post(f"{base}/v1/chat", json=changed)
    finally:
        ACTIVE.tape = None
    assert resp.status_code == 400 and "lk-eval replay miss" in resp.text
    assert tape.missed and tape.live_from == 2
    assert tape.reason.startswith(
        "replay miss at agent's call 2: body.messages[0].content: recorded "
    )
    assert '"Be brief and kind."' in tape.reason and '"Be very brief and kind."' in tape.reason
    assert [e["miss"]["call"] for e in events if "miss" in e] == [2]


def test_auto_goes_live_from_the_first_miss_and_records_the_new_episode(
    server: ThreadingHTTPServer,
) -> None:
    base = f"http://127.0.0.1:{server.server_address[1]}"
    _, events = _tape("record", [])
    with httpx.Client() as client:
        for n in (1, 2, 3):
            client.post(f"{base}/c", json={"n": n}).read()
    recorded = _exchanges(events)
    tape, events = _tape("auto", recorded)
    try:
        with httpx.Client() as client:
            got = [client.post(f"{base}/c", json={"n": n}).json() for n in (1, 5, 3)]
    finally:
        ACTIVE.tape = None
    assert got[1] == {"path": "/c", "got": '{"n":5}'}  # live
    assert tape.live and tape.live_from == 2 and "body.n: recorded 2, sent 5" in tape.reason
    episode = _exchanges(events)
    assert [(e["call"], e["replayed"]) for e in episode] == [(1, True), (2, False), (3, False)]


def test_volatile_fields_and_user_rules_do_not_break_a_match() -> None:
    rules = tp.Rules.from_json(
        {
            "ignore_fields": ["metadata.session"],
            "ignore_patterns": [r"\d{4}-\d{2}-\d{2}", "BK-\\d+"],
        }
    )
    was = tp.request_record(
        "POST",
        "http://h/v1/x",
        json.dumps(
            {
                "user": "a",
                "stream_options": {"x": 1},
                "metadata": {"session": 1, "k": 2},
                "content": "Today is 2026-11-25, booking BK-1",
            }
        ).encode(),
    )
    now = tp.request_record(
        "POST",
        "http://h/v1/x",
        json.dumps(
            {
                "user": "b",
                "metadata": {"session": 9, "k": 2},
                "content": "Today is 2026-11-26, booking BK-77",
            }
        ).encode(),
    )
    assert tp.request_key(was, rules) == tp.request_key(now, rules)
    assert tp.request_key(was, tp.Rules()) != tp.request_key(now, tp.Rules())


def _get(call: int, path: str, concurrent: tuple[int, ...] = ()) -> dict[str, Any]:
    exchange: dict[str, Any] = {
        "call": call,
        "request": tp.request_record("GET", f"http://h{path}", b""),
        "response": {"status": 200, "chunks": [path]},
    }
    if concurrent:
        exchange["concurrent"] = list(concurrent)
    return exchange


def test_calls_that_overlapped_when_recorded_match_in_any_order() -> None:
    recorded = [_get(1, "/t?i=0"), _get(2, "/t?i=1", (1,)), _get(3, "/t?i=2", (1, 2))]
    tape = tp.Tape("agent", "replay", recorded, tp.Rules(), lambda e: None)
    for i in (2, 0, 1):
        call = tape.begin("GET", f"http://h/t?i={i}", b"")
        assert call.recorded is not None and call.recorded["response"]["chunks"] == [f"/t?i={i}"]
    assert not tape.missed


def test_calls_that_did_not_overlap_must_come_in_the_recorded_order() -> None:
    """An agent that stopped making a side-effecting POST while its later calls stayed the
    same: its next call equals a later recorded one, and it is a divergence all the same."""
    recorded = [
        _get(1, "/chat"),
        {**_get(2, "/book"), "request": tp.request_record("POST", "http://h/book", b"{}")},
        _get(3, "/chat2"),
        _get(4, "/check"),
    ]
    tape = tp.Tape("agent", "replay", recorded, tp.Rules(), lambda e: None)
    assert tape.begin("GET", "http://h/chat", b"").recorded is not None
    skipped = tape.begin("GET", "http://h/chat2", b"")
    assert skipped.recorded is None and tape.missed and tape.live_from == 2
    assert tape.reason == (
        "replay miss at agent's call 2: out of order: it is the recording's call 3, and the "
        "recording's call 2 (POST http://h/book) was not made before it"
    )
    events: list[dict[str, Any]] = []
    auto = tp.Tape("agent", "auto", recorded, tp.Rules(), events.append)
    auto.begin("GET", "http://h/chat", b"")
    assert auto.begin("GET", "http://h/chat2", b"").live and auto.live_from == 2
    assert auto.begin("GET", "http://h/check", b"").live  # live from the divergence on


def test_what_was_in_flight_is_recorded_with_each_exchange() -> None:
    events: list[dict[str, Any]] = []
    tape = tp.Tape("agent", "record", [], tp.Rules(), events.append)
    first, second = tape.begin("GET", "http://h/a", b""), tape.begin("GET", "http://h/b", b"")
    tape.finish(first, {"status": 200})
    tape.finish(second, {"status": 200})
    tape.finish(tape.begin("GET", "http://h/c", b""), {"status": 200})
    concurrent = [e["exchange"].get("concurrent") for e in events if "exchange" in e]
    assert concurrent == [None, [1], None]


def test_one_client_diverging_takes_the_attempts_other_clients_live(tmp_path: Any) -> None:
    """The caller's tape diverges; the judge's next request equals its recording and still
    goes live: from the first divergence nothing the recording decided is kept."""
    flag = str(tmp_path / "live")
    recorded = [_get(1, "/x")]

    def tape(client: str) -> tp.Tape:
        return tp.Tape(
            client,
            "auto",
            recorded,
            tp.Rules(),
            lambda e: None,
            diverged=lambda: tp.read_flag(flag),
            on_diverge=lambda reason: tp.raise_flag(flag, reason),
        )

    caller, judge = tape("caller"), tape("judge")
    assert caller.begin("GET", "http://h/other", b"").live
    call = judge.begin("GET", "http://h/x", b"")
    assert call.live and call.recorded is None
    assert judge.reason.startswith("judge's call 1 is live: replay miss at caller's call 1: ")


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ([], "one JSON object"),
        ({"ignore": []}, "unknown key 'ignore'"),
        ({"ignore_fields": "x"}, "ignore_fields must be a list"),
        ({"ignore_patterns": ["("]}, "is not a regex"),
        ({"ignore_fields": ["a..b"]}, "is not a path"),
    ],
)
def test_bad_rules_are_named(rules: Any, message: str) -> None:
    with pytest.raises(tp.RulesError, match=message):
        tp.Rules.from_json(rules)


def test_a_forwarders_prefix_is_taped_as_the_upstream_it_forwards_to() -> None:
    """``--speech local``: the agent's LLM calls go to a per-attempt prefix on a random port
    and are passed on unchanged. Taped as the upstream's URL, a recording made on one port and
    attempt replays on another; a call outside the prefix, or to another upstream, does not."""
    upstream = "http://llm.example/v1"
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
    record = tp.Tape("agent", "record", [], tp.Rules(), lambda e: None, aliases={
        "http://127.0.0.1:4001/o/run1-a/v1": upstream})  # fmt: skip
    call = record.begin("POST", "http://127.0.0.1:4001/o/run1-a/v1/chat/completions?x=1", body)
    assert call.request["url"] == f"{upstream}/chat/completions?x=1"
    recorded = [{"call": 1, "request": call.request, "response": {"status": 200, "chunks": []}}]

    def replay(url: str, forwards_to: str = upstream) -> tp.Call:
        aliases = {"http://127.0.0.1:5123/o/run2-b/v1": forwards_to}
        tape = tp.Tape("agent", "replay", recorded, tp.Rules(), lambda e: None, aliases=aliases)
        return tape.begin("POST", url, body)

    assert replay("http://127.0.0.1:5123/o/run2-b/v1/chat/completions?x=1").recorded is not None
    assert replay("http://127.0.0.1:5123/o/run2-b/v1/chat/completions?x=1", "http://other/v1").miss
    assert replay("http://127.0.0.1:5123/o/run2-bb/v1/chat/completions?x=1").miss  # not it
    assert tp.unalias("http://h/p", {}) == "http://h/p"


def test_the_agent_reads_its_aliases_and_ignores_a_bad_value() -> None:
    good = json.dumps({"http://127.0.0.1:1/a/k/v1": "https://gw/v1"})
    assert transports._aliases(good) == {"http://127.0.0.1:1/a/k/v1": "https://gw/v1"}
    assert transports._aliases("[not json") == transports._aliases("[1]") == {}
