"""Tests for the scripted OpenAI-compatible LLM server, driven by real clients.

The server stands in for OpenAI under the agent (livekit-plugins-openai), the simulated caller
and the judge, so these tests talk to it with the clients those use: the ``openai`` SDK and
livekit's ``openai.LLM``, plus raw httpx where the exact wire format matters.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from conftest import reset_then_ask

from lkeval.testing.llm_rules import RuleError, load_rules
from lkeval.testing.llm_server import LLMServer

USER = [{"role": "user", "content": "hello there"}]


@pytest.fixture
def srv() -> Iterator[LLMServer]:
    with LLMServer() as server:
        yield server


def client(server: LLMServer, **kwargs: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="test-key", **kwargs)


def ask(server: LLMServer, messages: list[dict[str, Any]], **body: Any) -> str:
    """Non-streaming request over raw HTTP; returns the reply text."""
    payload = {"model": "m", "messages": messages, **body}
    resp = httpx.post(f"{server.base_url}/chat/completions", json=payload, timeout=5)
    resp.raise_for_status()
    return str(resp.json()["choices"][0]["message"]["content"])


def tool_turn(name: str, output: str = "sunny") -> list[dict[str, Any]]:
    """A conversation whose last message is the result of a call to ``name``."""
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": "{}"}}
    return [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": output},
    ]


def test_base_url_and_models(srv: LLMServer) -> None:
    srv.set_rules([{"model": "judge-1", "text": "x"}, {"model": "gpt-*", "text": "y"}])
    assert srv.base_url == f"http://127.0.0.1:{srv.port}/v1"
    for url in (f"{srv.base_url}/models", f"http://127.0.0.1:{srv.port}/models"):
        ids = [m["id"] for m in httpx.get(url, timeout=5).json()["data"]]
        assert "judge-1" in ids and "gpt-*" not in ids
    assert [m.id for m in client(srv).models.list()][:1] == ["lkeval-scripted"]


def test_streaming_text_via_sdk(srv: LLMServer) -> None:
    srv.set_rules([{"last_user": "HELLO", "text": "Hi! You said: {last_user}. {not_a_field}"}])
    stream = client(srv).chat.completions.create(model="m", messages=USER, stream=True)
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hi! You said: hello there. {not_a_field}"
    assert len(chunks) > 3  # streamed word by word, not in one piece
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(c.object == "chat.completion.chunk" for c in chunks)


def test_streaming_tool_call_and_usage_via_sdk(srv: LLMServer) -> None:
    args = {"city": "Paris", "unit": "celsius", "note": "a long enough value to split"}
    srv.set_rules(
        [{"has_tool": "get_weather", "tool_calls": [{"name": "get_weather", "arguments": args}]}]
    )
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
    stream = client(srv).chat.completions.create(
        model="m", messages=USER, tools=tools, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or []:
                entry = calls.setdefault(tc.index, {"id": "", "name": "", "args": ""})
                entry["id"] += tc.id or ""
                entry["name"] += (tc.function and tc.function.name) or ""
                entry["args"] += (tc.function and tc.function.arguments) or ""
    assert list(calls) == [0]
    assert calls[0]["name"] == "get_weather" and calls[0]["id"].startswith("call_")
    assert json.loads(calls[0]["args"]) == args
    finish = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finish == ["tool_calls"]
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == [] and usage_chunk.usage is not None
    u = usage_chunk.usage
    assert u.prompt_tokens > 0 and u.completion_tokens > 0
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens


def test_stream_wire_format_ends_with_done(srv: LLMServer) -> None:
    body = {"model": "m", "messages": USER, "stream": True}
    with httpx.stream("POST", f"http://127.0.0.1:{srv.port}/chat/completions", json=body) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [line for line in r.iter_lines() if line]
    assert events[-1] == "data: [DONE]"
    assert all(e.startswith("data: ") for e in events)
    assert not any('"usage"' in e for e in events)  # no include_usage, no usage chunk


def test_non_streaming_text_tool_calls_and_usage(srv: LLMServer) -> None:
    srv.set_rules(
        [
            {"last_user": "book", "tool_calls": [{"name": "book", "arguments": {"day": "mon"}}]},
            {"text": "plain answer"},
        ]
    )
    r = client(srv).chat.completions.create(model="m", messages=USER)
    assert r.choices[0].message.content == "plain answer"
    assert r.choices[0].finish_reason == "stop"
    assert r.usage is not None and r.usage.total_tokens > 0
    r = client(srv).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "please book"}]
    )
    (call,) = r.choices[0].message.tool_calls or []
    assert r.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "book" and json.loads(call.function.arguments) == {"day": "mon"}


def test_default_text_when_no_rule_matches() -> None:
    with LLMServer([{"last_user": "nomatch", "text": "no"}], default_text="fallback") as srv:
        assert ask(srv, USER) == "fallback"


def test_match_model_exact_and_glob(srv: LLMServer) -> None:
    srv.set_rules([{"model": "judge", "text": "exact"}, {"model": "gpt-4*", "text": "glob"}])
    assert ask(srv, USER, model="judge") == "exact"
    assert ask(srv, USER, model="gpt-4o-mini") == "glob"
    assert ask(srv, USER, model="judge-2") == "OK."


def test_match_last_user_only_looks_at_last_user_message(srv: LLMServer) -> None:
    srv.set_rules([{"last_user": r"\brefund\b", "text": "refund"}])
    assert ask(srv, [{"role": "user", "content": "I want a REFUND"}]) == "refund"
    earlier = [
        {"role": "user", "content": "refund please"},
        {"role": "assistant", "content": "sure"},
        {"role": "user", "content": "thanks"},
    ]
    assert ask(srv, earlier) == "OK."
    parts = [{"role": "user", "content": [{"type": "text", "text": "a refund"}]}]
    assert ask(srv, parts) == "refund"


def test_match_system_includes_developer_messages(srv: LLMServer) -> None:
    srv.set_rules([{"system": "you are a judge", "text": "verdict"}])
    assert ask(srv, [{"role": "system", "content": "You are a JUDGE."}, *USER]) == "verdict"
    assert ask(srv, [{"role": "developer", "content": "you are a judge"}, *USER]) == "verdict"
    assert ask(srv, [{"role": "system", "content": "you are a caller"}, *USER]) == "OK."
    assert ask(srv, [{"role": "user", "content": "you are a judge"}]) == "OK."


def test_match_after_tool_by_name_and_any(srv: LLMServer) -> None:
    srv.set_rules(
        [
            {"after_tool": "get_weather", "text": "It is {tool_output}."},
            {"after_tool": "*", "text": "some tool: {tool_output}"},
        ]
    )
    assert ask(srv, tool_turn("get_weather")) == "It is sunny."
    assert ask(srv, tool_turn("lookup", "42")) == "some tool: 42"
    assert ask(srv, [*tool_turn("get_weather")[:2], {"role": "user", "content": "hi"}]) == "OK."


def test_match_tool_choice_and_has_tool(srv: LLMServer) -> None:
    tools = [{"type": "function", "function": {"name": n}} for n in ("a_tool", "b_tool")]
    srv.set_rules(
        [{"tool_choice": "b_tool", "text": "forced"}, {"has_tool": "a_tool", "text": "offered"}]
    )
    forced = {"type": "function", "function": {"name": "b_tool"}}
    assert ask(srv, USER, tools=tools, tool_choice=forced) == "forced"
    assert ask(srv, USER, tools=tools, tool_choice="auto") == "offered"
    assert ask(srv, USER, tools=tools[1:]) == "OK."


def test_match_turn_counts_user_messages(srv: LLMServer) -> None:
    srv.set_rules([{"turn": 2, "text": "second"}])
    two = [*USER, {"role": "assistant", "content": "hi"}, {"role": "user", "content": "again"}]
    assert ask(srv, two) == "second"
    assert ask(srv, USER) == "OK."


def test_all_conditions_must_hold(srv: LLMServer) -> None:
    srv.set_rules([{"model": "caller", "last_user": "hello", "text": "both"}])
    assert ask(srv, USER, model="caller") == "both"
    assert ask(srv, USER, model="agent") == "OK."


def test_times_spends_rule_then_falls_through(srv: LLMServer) -> None:
    srv.set_rules([{"text": "first", "times": 2}, {"text": "then"}])
    assert [ask(srv, USER) for _ in range(3)] == ["first", "first", "then"]
    srv.set_rules([{"text": "reset", "times": 1}])  # a new script starts its counts afresh
    assert [ask(srv, USER) for _ in range(2)] == ["reset", "OK."]
    srv.add_rule({"text": "added"})
    assert ask(srv, USER) == "added"


def test_requests_are_recorded_with_path_and_auth(srv: LLMServer) -> None:
    client(srv).chat.completions.create(model="m", messages=USER)
    httpx.post(f"http://127.0.0.1:{srv.port}/chat/completions", json={"model": "n", "messages": []})
    first, second = srv.requests
    assert first.path == "/v1/chat/completions" and first.authorization == "Bearer test-key"
    assert first.body["messages"] == USER
    assert second.path == "/chat/completions" and second.body["model"] == "n"


def test_429_has_retry_after_and_error_body(srv: LLMServer) -> None:
    srv.set_rules([{"status": 429, "text": "slow down"}])
    resp = httpx.post(f"{srv.base_url}/chat/completions", json={"model": "m", "messages": USER})
    assert resp.status_code == 429 and resp.headers["retry-after"] == "0"
    assert resp.json()["error"]["message"] == "slow down"
    with pytest.raises(openai.RateLimitError):
        client(srv, max_retries=0).chat.completions.create(model="m", messages=USER)


def test_429_once_then_sdk_retry_succeeds(srv: LLMServer) -> None:
    srv.set_rules([{"status": 429, "times": 1}, {"text": "after retry"}])
    r = client(srv, max_retries=1).chat.completions.create(model="m", messages=USER)
    assert r.choices[0].message.content == "after retry"
    assert len(srv.requests) == 2


def test_500_is_a_server_error(srv: LLMServer) -> None:
    srv.set_rules([{"status": 500, "text": "boom"}])
    with pytest.raises(openai.InternalServerError) as info:
        client(srv, max_retries=0).chat.completions.create(model="m", messages=USER, stream=True)
    assert info.value.status_code == 500 and "boom" in str(info.value)


def test_delay_postpones_answer(srv: LLMServer) -> None:
    srv.set_rules([{"delay": 0.4, "text": "late"}])
    start = time.monotonic()
    assert ask(srv, USER) == "late"
    assert time.monotonic() - start >= 0.4


def test_hang_times_out_client_and_stop_releases_the_hanging_handler() -> None:
    server = LLMServer([{"hang": True}]).start()
    before = set(threading.enumerate())
    try:
        with pytest.raises(openai.APITimeoutError):
            client(server, max_retries=0, timeout=0.3).chat.completions.create(
                model="m", messages=USER
            )
    finally:
        hanging = [t for t in threading.enumerate() if t not in before]  # still in the hang
        stopper = threading.Thread(target=server.stop, daemon=True)
        stopper.start()
        stopper.join(timeout=60)  # generous: a liveness check, not a timing goal
    assert hanging, "the hanging request was never served"
    assert not stopper.is_alive(), "stop() blocked on the hanging handler"
    for thread in hanging:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in hanging), "stop() left the hanging handler hanging"
    server.stop()  # idempotent


def test_malformed_tool_arguments_pass_through(srv: LLMServer) -> None:
    bad = '{"city": "Par'
    srv.set_rules([{"tool_calls": [{"name": "get_weather", "arguments": bad}]}])
    r = client(srv).chat.completions.create(model="m", messages=USER)
    assert (r.choices[0].message.tool_calls or [])[0].function.arguments == bad
    chunks = list(client(srv).chat.completions.create(model="m", messages=USER, stream=True))
    streamed = "".join(
        tc.function.arguments or ""
        for c in chunks
        for tc in c.choices[0].delta.tool_calls or []
        if tc.function
    )
    assert streamed == bad


def test_invalid_rules_are_rejected_up_front(srv: LLMServer) -> None:
    with pytest.raises(RuleError, match="unknown key"):
        srv.set_rules([{"last_usr": "typo"}])
    with pytest.raises(RuleError, match="not a valid regex"):
        srv.add_rule({"system": "("})
    with pytest.raises(RuleError, match="status"):
        LLMServer([{"status": 200}])


def test_load_rules_yaml_json_and_errors(tmp_path: Path) -> None:
    (tmp_path / "r.yaml").write_text("rules:\n  - last_user: hi\n    text: hello\n")
    (tmp_path / "r.json").write_text(json.dumps([{"turn": 1, "text": "one"}]))
    assert load_rules(tmp_path / "r.yaml") == [{"last_user": "hi", "text": "hello"}]
    assert load_rules(tmp_path / "r.json") == [{"turn": 1, "text": "one"}]
    (tmp_path / "bad.yaml").write_text("- times: 0\n")
    with pytest.raises(RuleError, match=r"bad\.yaml: rule 1: 'times'"):
        load_rules(tmp_path / "bad.yaml")
    (tmp_path / "d.yaml").write_text("default_text: nothing scripted\nrules: []\n")
    with LLMServer.from_file(tmp_path / "d.yaml") as srv:
        assert ask(srv, USER) == "nothing scripted"


def test_cli_serves_until_sigterm(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("- last_user: ping\n  text: pong\n")
    url_file = tmp_path / "url.txt"
    cmd = [sys.executable, "-m", "lkeval.testing.llm_server", "--rules", str(rules)]
    proc = subprocess.Popen(
        [*cmd, "--url-file", str(url_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("listening on http://127.0.0.1:") and line.endswith("/v1")
        base_url = line.removeprefix("listening on ")
        assert url_file.read_text() == base_url
        payload = {"model": "m", "messages": [{"role": "user", "content": "ping"}]}
        resp = httpx.post(f"{base_url}/chat/completions", json=payload, timeout=5)
        assert resp.json()["choices"][0]["message"]["content"] == "pong"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("content", ["- last_user: [unclosed\n", "- bogus_key: 1\n", None])
def test_cli_bad_rules_file_exits_2(tmp_path: Path, content: str | None) -> None:
    rules = tmp_path / "broken-rules.yaml"
    if content is not None:
        rules.write_text(content)
    proc = subprocess.run(
        [sys.executable, "-m", "lkeval.testing.llm_server", "--rules", str(rules)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert "broken-rules.yaml" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert proc.stdout == ""


def test_livekit_openai_llm_consumes_tool_call(srv: LLMServer) -> None:
    from livekit.agents import llm
    from livekit.plugins import openai as lk_openai

    @llm.function_tool
    async def get_weather(city: str) -> str:
        """Look up the weather in a city."""
        return "sunny"

    srv.set_rules(
        [
            {"after_tool": "get_weather", "text": "It is {tool_output} there."},
            {
                "has_tool": "get_weather",
                "text": "Let me check.",
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
            },
        ]
    )

    async def run(chat_ctx: llm.ChatContext) -> tuple[str, list[llm.FunctionToolCall]]:
        model = lk_openai.LLM(model="agent-model", base_url=srv.base_url, api_key="k")
        text, calls = "", []
        try:
            async with model.chat(chat_ctx=chat_ctx, tools=[get_weather]) as stream:
                async for chunk in stream:
                    if chunk.delta:
                        text += chunk.delta.content or ""
                        calls += chunk.delta.tool_calls
        finally:
            await model.aclose()
        return text, calls

    ctx = llm.ChatContext()
    ctx.add_message(role="user", content="What's the weather in Paris?")
    text, calls = asyncio.run(run(ctx))
    assert text == "Let me check."
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris"})
    ]

    # Feed the tool result back: the server sees the call id and answers the follow-up rule.
    call = calls[0]
    ctx.insert(llm.FunctionCall(call_id=call.call_id, name=call.name, arguments=call.arguments))
    ctx.insert(llm.FunctionCallOutput(call_id=call.call_id, output="sunny", is_error=False))
    text, calls = asyncio.run(run(ctx))
    assert text == "It is sunny there." and calls == []
    assert srv.requests[0].body["stream_options"] == {"include_usage": True}


def test_a_client_that_resets_its_connection_leaves_stderr_quiet(
    srv: LLMServer, capfd: pytest.CaptureFixture[str]
) -> None:
    """A cancelled ask resets its connection; a real server logs nothing, and a traceback from
    ours would land on the stderr that tests read as lk-eval's own."""
    reset_then_ask(srv.port, lambda: ask(srv, USER))
    assert "Traceback" not in capfd.readouterr().err
