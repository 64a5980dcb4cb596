"""A judge preflight that fails says so in one line: no asyncio traceback (issue 18 item 11).

The judge is a real server on loopback that fails the way real ones do: an HTTP error status,
a hang, a connection closed without an answer, bytes that are not HTTP, an error inside the
stream, or one canary failing while the other's asks are still in flight (a judge that answers
in text: test_judge_preflight.py). Whatever it does, stderr holds no traceback and no asyncio
"never retrieved" report, and no request of the failed preflight is left running (a failed
canary's other asks would go on retrying while the run exits).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import HOTEL, hotel_env, reset_then_ask, run_argv, run_lkeval

from lkeval.llm.config import LLMEndpointOptions, LLMOptions, LLMSpec, resolve_llm_spec
from lkeval.llm.preflight import JudgePreflightError, _ask_canary, preflight_judge
from lkeval.testing.llm_server import LLMServer

REFUSAL = "I can't help with that"  # only the known-bad canary has the agent say this
NOISE = ("Traceback", "never retrieved", "Task was destroyed", "asyncio", "Exception in")


def verdict(value: str, **match: Any) -> dict[str, Any]:
    args = {"reasoning": f"canary {value}", "verdict": value}
    return {**match, "tool_calls": [{"name": "submit_verdict", "arguments": args}]}


def spec_at(base_url: str) -> LLMSpec:
    flags = LLMOptions(judge=LLMEndpointOptions(model="judge", base_url=base_url))
    spec = resolve_llm_spec("judge", flags, environ={})
    return replace(spec, retry_delay=0.01, max_retries=1, timeout=2.0)


class RawServer:
    """A TCP server on loopback that reads a request and then answers ``reply`` (raw bytes,
    possibly not HTTP at all) and closes the connection; ``b""`` closes it unanswered."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            with conn, contextlib.suppress(ConnectionError):  # a client's reset: no traceback
                conn.recv(65536)
                conn.sendall(self.reply)

    def close(self) -> None:
        self.sock.close()


def test_the_raw_server_is_quiet_and_still_serves_after_client_resets(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A reset would kill its one serving thread with a traceback on the stderr that the quiet
    checks below read as lk-eval's."""
    server = RawServer(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
    try:
        port = int(server.base_url.rsplit(":", 1)[1].removesuffix("/v1"))
        reset_then_ask(port, lambda: httpx.get(server.base_url, timeout=30).status_code == 204)
    finally:
        server.close()
    assert "Traceback" not in capfd.readouterr().err


LLM_SERVER_CASES: dict[str, list[dict[str, Any]]] = {
    "http 500": [{"model": "judge", "status": 500, "text": "boom"}],
    "http 401": [{"model": "judge", "status": 401, "text": "Incorrect API key"}],
    "hangs": [{"model": "judge", "hang": True}],
    "error inside the stream": [{"model": "judge", "text": "part", "stream_error": "crashed"}],
    # the first ask (the verdict form) works; then the known-bad canary fails while the
    # known-good one's asks hang, and the other way round
    "bad canary fails, good one hangs": [
        {**verdict("pass"), "times": 1},
        {"model": "judge", "last_user": REFUSAL, "status": 500, "text": "boom"},
        {"model": "judge", "hang": True},
    ],
    "good canary refused, bad one slow": [
        {**verdict("pass"), "times": 1},
        {**verdict("fail", last_user=REFUSAL), "delay": 1.0},
        {"model": "judge", "status": 401, "text": "nope"},
    ],
    "one ask of three fails": [
        {**verdict("pass"), "times": 1},
        {"model": "judge", "status": 400, "text": "bad request", "times": 1},
        {**verdict("fail", last_user=REFUSAL), "delay": 0.5},
        {**verdict("pass"), "delay": 0.5},
    ],
}
RAW_CASES = {
    "closes the connection": b"",
    "answers bytes that are not HTTP": b"\x00\xffNOT HTTP\r\n\r\n",
    "answers a JSON body that does not parse": (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n{not json"
    ),
    "breaks off a stream": (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n5\r\ndata:"
    ),
}


@pytest.fixture
def quiet_check(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> Iterator[None]:
    """After the test: nothing on stderr or in asyncio's log (where "Task exception was never
    retrieved" and asyncio.run's shutdown errors go, with their tracebacks)."""
    caplog.set_level(logging.DEBUG, logger="asyncio")
    yield
    err = capfd.readouterr().err
    assert not any(word in err for word in NOISE), err
    assert [r for r in caplog.records if r.name == "asyncio" and r.levelno >= logging.ERROR] == []


def _fails_in_one_line(spec: LLMSpec) -> str:
    with pytest.raises(JudgePreflightError) as info:
        preflight_judge(spec, environ={})
    message = str(info.value)
    assert "\n" not in message and "no agent was started" in message
    return message


@pytest.mark.parametrize("case", sorted(LLM_SERVER_CASES))
def test_a_failing_judge_stops_the_preflight_in_one_line(case: str, quiet_check: None) -> None:
    with LLMServer(LLM_SERVER_CASES[case]) as server:
        message = _fails_in_one_line(spec_at(server.base_url))
        port = server.port
    assert f"judge LLM judge at 127.0.0.1:{port}" in message


@pytest.mark.parametrize("case", sorted(RAW_CASES))
def test_a_judge_that_answers_no_http_stops_the_preflight_in_one_line(
    case: str, quiet_check: None
) -> None:
    server = RawServer(RAW_CASES[case])
    try:
        message = _fails_in_one_line(spec_at(server.base_url))
    finally:
        server.close()
    assert server.base_url.removeprefix("http://").removesuffix("/v1") in message


def test_a_failed_ask_cancels_the_canarys_other_asks_before_the_error_is_raised() -> None:
    """``asyncio.gather`` alone would leave the other two asks running (retrying, holding
    connections) while the error travels up and the run exits."""
    still_asking: list[str] = []

    async def scenario() -> None:
        calls = iter(range(3))

        async def ask() -> str:
            if next(calls) == 0:
                await asyncio.sleep(0)
                raise JudgePreflightError("HTTP 500")
            still_asking.append("asking")
            try:
                await asyncio.Event().wait()
            finally:
                still_asking.remove("asking")
            return "fail"

        with pytest.raises(JudgePreflightError):
            await _ask_canary(ask, maybe_is_pass=False)
        assert still_asking == []  # cancelled and finished before the error reached us

    asyncio.run(scenario())


def test_cli_prints_one_line_when_a_canary_fails_while_the_other_is_in_flight(
    tmp_path: Path,
) -> None:
    """The whole CLI, as a user runs it: exit 2, stdout's model line, stderr one line."""
    scenarios = tmp_path / "scenarios.yaml"
    scenarios.write_text(
        "name: Sim\nscenarios:\n  - label: Book\n    instructions: Book a room.\n"
        "    agent_expectations: The agent books the room.\n"
    )
    rules = LLM_SERVER_CASES["bad canary fails, good one hangs"]
    with LLMServer(rules) as llm:
        argv = [*run_argv(HOTEL / "agent.py", scenarios, tmp_path / "results.json")]
        argv += ["--caller-model", "caller", "--judge-model", "judge", "--no-github"]
        # cold starts: a warm run preloads a fork server during the preflight only to stop
        # it, which test_signal_before_the_engine.py's failed-preflight test checks
        argv += ["--cold-start"]
        env = hotel_env(llm, LKEVAL_LLM_TIMEOUT="5", LKEVAL_LLM_RETRIES="0")
        proc = run_lkeval(argv, env, timeout=180)
        models = {r.body.get("model") for r in llm.requests}
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("lk-eval: judge preflight: no verdict on a canary transcript")
    assert "HTTP 500" in proc.stderr and models == {"judge"}  # no agent booted
