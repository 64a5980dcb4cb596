"""The scripted LLM server behaving like real servers and weak models, over real HTTP.

Each test drives the server with the clients lk-eval and the agents use (the ``openai`` SDK,
livekit's Inference LLM) or raw httpx where the exact wire format is the point, and checks the
behaviour that llama.cpp's ``llama-server`` or a small model shows (docs/testing.md, the quirk
tables).
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from lkeval.testing.llm_quirks import LLAMA_TOOL_CHOICE_WARNING, NoisyVerdicts
from lkeval.testing.llm_rules import Reply, RuleError, ToolCall
from lkeval.testing.llm_server import LLMServer

USER = [{"role": "user", "content": "did the agent book the room?"}]
VERDICT_TOOL = [
    {
        "type": "function",
        "function": {
            "name": "submit_verdict",
            "parameters": {
                "type": "object",
                "properties": {"verdict": {"type": "string", "enum": ["pass", "fail", "maybe"]}},
            },
        },
    }
]
NAMED = {"type": "function", "function": {"name": "submit_verdict"}}
PASS = {"name": "submit_verdict", "arguments": {"reasoning": "booked", "verdict": "pass"}}
FAIL = {"name": "submit_verdict", "arguments": {"reasoning": "no booking", "verdict": "fail"}}


def sdk(server: LLMServer, **kwargs: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="k", **kwargs)


def streamed(server: LLMServer, **body: Any) -> tuple[str, list[dict[str, str]], str | None]:
    """Text, tool calls and finish reason of one streamed answer, read with the SDK."""
    chunks = sdk(server).chat.completions.create(model="m", messages=USER, stream=True, **body)
    text, calls, finish = "", {}, None
    for chunk in chunks:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
            for tc in choice.delta.tool_calls or []:
                entry = calls.setdefault(tc.index, {"name": "", "arguments": ""})
                entry["name"] += (tc.function and tc.function.name) or ""
                entry["arguments"] += (tc.function and tc.function.arguments) or ""
    return text, list(calls.values()), finish


def raw_events(server: LLMServer, **body: Any) -> tuple[int, list[str]]:
    """HTTP status and the SSE ``data:`` payloads of one streamed request."""
    payload = {"model": "m", "messages": USER, "stream": True, **body}
    with httpx.stream("POST", f"{server.base_url}/chat/completions", json=payload) as r:
        return r.status_code, [line[6:] for line in r.iter_lines() if line.startswith("data: ")]


@pytest.fixture
def llama() -> Iterator[LLMServer]:
    """A server that behaves like llama-server, scripted as a judge that obeys a forced tool."""
    rules = [
        # "required" first: a rule naming the only tool offered matches "required" too
        {"tool_choice": "required", "tool_calls": [FAIL]},
        {"tool_choice": "submit_verdict", "tool_calls": [PASS]},
        {"text": "I think the agent did fine."},
    ]
    with LLMServer(rules, quirks={"like": "llama-server"}) as server:
        yield server


def test_named_tool_choice_is_ignored_with_llamas_warning(llama: LLMServer) -> None:
    text, calls, finish = streamed(llama, tools=VERDICT_TOOL, tool_choice=NAMED)
    assert (text, calls, finish) == ("I think the agent did fine.", [], "stop")
    assert llama.warnings == [LLAMA_TOOL_CHOICE_WARNING]
    assert "Wrong type supplied for parameter 'tool_choice'" in LLAMA_TOOL_CHOICE_WARNING
    assert llama.requests[-1].body["tool_choice"] == NAMED  # recorded as sent


def test_required_tool_choice_comes_back_as_text_padded_to_the_cap(llama: LLMServer) -> None:
    """llama.cpp with Qwen2.5 GGUFs: the forced call is written as content, then newlines
    until max_tokens (finish "length"); so every such call costs the whole cap."""
    r = sdk(llama).chat.completions.create(
        model="m", messages=USER, tools=VERDICT_TOOL, tool_choice="required", max_tokens=40
    )
    message = r.choices[0].message
    assert not message.tool_calls and r.choices[0].finish_reason == "length"
    assert json.loads((message.content or "").strip()) == FAIL
    assert (
        (message.content or "").endswith("\n" * 10) and r.usage and r.usage.completion_tokens == 40
    )
    text, calls, finish = streamed(llama, tools=VERDICT_TOOL, tool_choice="required", max_tokens=40)
    assert calls == [] and finish == "length" and json.loads(text.strip()) == FAIL
    assert llama.warnings == []


def test_json_schema_response_format_is_enforced() -> None:
    schema = {"type": "json_schema", "json_schema": {"name": "submit_verdict", "schema": {}}}
    with LLMServer([{"tool_calls": [FAIL]}], quirks={"like": "llama-server"}) as llama:
        text, calls, finish = streamed(
            llama, response_format=schema, max_tokens=40, stream_options={"include_usage": True}
        )
    assert calls == [] and finish == "stop"
    assert json.loads(text) == FAIL["arguments"] and text == text.strip()


def test_a_required_tool_choice_without_the_quirk_is_a_call() -> None:
    with LLMServer([{"tool_choice": "required", "tool_calls": [FAIL]}]) as server:
        _, calls, finish = streamed(server, tools=VERDICT_TOOL, tool_choice="required")
    assert [c["name"] for c in calls] == ["submit_verdict"] and finish == "tool_calls"


def test_openai_default_honours_the_named_form() -> None:
    with LLMServer([{"tool_choice": "submit_verdict", "tool_calls": [PASS]}]) as server:
        _, calls, finish = streamed(server, tools=VERDICT_TOOL, tool_choice=NAMED)
    assert [c["name"] for c in calls] == ["submit_verdict"] and finish == "tool_calls"


@pytest.mark.parametrize("style", ["json", "fenced"])
def test_tool_call_written_as_json_text(style: str) -> None:
    rule = {"text": "Here is my verdict:", "tool_calls": [PASS], "tool_calls_as_text": style}
    with LLMServer([rule]) as server:
        text, calls, finish = streamed(server, tools=VERDICT_TOOL)
        whole = sdk(server).chat.completions.create(model="m", messages=USER)
    assert calls == [] and finish == "stop"
    assert whole.choices[0].message.content == text and not whole.choices[0].message.tool_calls
    first, body = text.split("\n", 1)
    assert first == "Here is my verdict:"
    if style == "fenced":
        assert body.startswith("```json\n") and body.endswith("\n```")
        body = body[len("```json\n") : -len("\n```")]
    assert json.loads(body) == PASS


def test_weak_judge_recipes_over_the_wire() -> None:
    """Unknown tool, two disagreeing verdicts, a verdict outside the enum, an echo."""
    rules = [
        {"last_user": "unknown", "tool_calls": [{"name": "lookup_booking", "arguments": {}}]},
        {"last_user": "twice", "tool_calls": [PASS, FAIL]},
        {
            "last_user": "enum",
            "tool_calls": [{"name": "submit_verdict", "arguments": {"verdict": "mostly"}}],
        },
        {"last_user": "echo", "text": "{last_user}"},
    ]
    with LLMServer(rules) as server:

        def ask(words: str) -> tuple[str, list[dict[str, str]], str | None]:
            msgs = [{"role": "user", "content": words}]
            r = sdk(server).chat.completions.create(model="m", messages=msgs, tools=VERDICT_TOOL)
            calls = r.choices[0].message.tool_calls or []
            pairs = [{"name": c.function.name, "arguments": c.function.arguments} for c in calls]
            return r.choices[0].message.content or "", pairs, r.choices[0].finish_reason

        assert ask("unknown")[1][0]["name"] == "lookup_booking"
        verdicts = [json.loads(c["arguments"])["verdict"] for c in ask("twice")[1]]
        assert verdicts == ["pass", "fail"]
        assert json.loads(ask("enum")[1][0]["arguments"])["verdict"] == "mostly"
        assert ask("please echo me") == ("please echo me", [], "stop")


def test_error_inside_an_http_200_stream() -> None:
    rule = {"text": "Let me", "stream_error": "context size exceeded"}
    with LLMServer([rule]) as server:
        status, events = raw_events(server)
        with pytest.raises(openai.APIError, match="context size exceeded"):
            streamed(server)
        with pytest.raises(openai.InternalServerError, match="context size exceeded"):
            sdk(server, max_retries=0).chat.completions.create(model="m", messages=USER)
    assert status == 200
    assert "[DONE]" not in events
    text = "".join((json.loads(e)["choices"][0]["delta"].get("content") or "") for e in events[:-1])
    assert text == "Let me"
    assert json.loads(events[-1]) == {
        "error": {"code": 500, "message": "context size exceeded", "type": "server_error"}
    }


def test_usage_chunk_and_llama_timings() -> None:
    with LLMServer([{"text": "fine"}], quirks={"timings": True}) as server:
        status, events = raw_events(server, stream_options={"include_usage": True})
        text, _, finish = streamed(server, stream_options={"include_usage": True})
        whole = httpx.post(
            f"{server.base_url}/chat/completions", json={"model": "m", "messages": USER}
        ).json()
    chunks = [json.loads(e) for e in events if e != "[DONE]"]
    assert status == 200 and events[-1] == "[DONE]"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
    assert chunks[-1]["timings"]["predicted_n"] == chunks[-1]["usage"]["completion_tokens"]
    assert all("timings" not in c for c in chunks[:-1])
    assert (text, finish) == ("fine", "stop")  # the SDK ignores the extra field
    assert "timings" in whole and whole["choices"][0]["message"]["content"] == "fine"


def test_server_delay_applies_to_every_answer() -> None:
    with LLMServer([{"text": "late", "delay": 0.2}], quirks={"delay": 0.3}) as server:
        start = time.monotonic()
        assert streamed(server)[0] == "late"
        assert time.monotonic() - start >= 0.5


def test_ramble_honours_max_tokens() -> None:
    with LLMServer([{"text": "Well, let me think", "ramble": True}]) as server:
        text, _, finish = streamed(server, max_tokens=12)
        whole = sdk(server).chat.completions.create(
            model="m", messages=USER, max_completion_tokens=7
        )
    assert len(text.split()) == 12 and text.startswith("Well, let me think")
    assert finish == "length"
    content = whole.choices[0].message.content or ""
    assert len(content.split()) == 7 and whole.choices[0].finish_reason == "length"


def test_ramble_without_max_tokens_runs_until_the_client_gives_up() -> None:
    with LLMServer([{"text": "Well,", "ramble": True}]) as server:
        received = 0
        with pytest.raises(openai.APITimeoutError):
            sdk(server, max_retries=0, timeout=0.2).chat.completions.create(
                model="m", messages=USER
            )
        payload = {"model": "m", "messages": USER, "stream": True}
        with httpx.stream("POST", f"{server.base_url}/chat/completions", json=payload) as r:
            for line in r.iter_lines():
                received += line.startswith("data: ")
                assert 'finish_reason": "stop' not in line and "[DONE]" not in line
                if received == 40:
                    break
    assert received == 40  # still talking after 40 chunks


def _verdicts(server: LLMServer, n: int) -> list[str]:
    out = []
    for _ in range(n):
        r = sdk(server).chat.completions.create(model="m", messages=USER, tools=VERDICT_TOOL)
        call = (r.choices[0].message.tool_calls or [])[0]
        out.append(json.loads(call.function.arguments)["verdict"])
    return out


def test_noisy_judge_flips_a_seeded_fraction() -> None:
    noisy = {"noisy_verdicts": {"fraction": 0.3, "seed": 11}}
    runs = []
    for _ in range(2):
        with LLMServer([{"tool_calls": [PASS]}], quirks=noisy) as server:
            runs.append(_verdicts(server, 40))
            assert server.quirks.noisy_verdicts is not None
            assert server.quirks.noisy_verdicts.seen == 40
            assert server.quirks.noisy_verdicts.flipped == runs[-1].count("fail")
    assert runs[0] == runs[1]  # same seed, same flips
    assert 0 < runs[0].count("fail") < 40
    with LLMServer([{"tool_calls": [FAIL]}], quirks={"noisy_verdicts": {"fraction": 1}}) as s:
        assert _verdicts(s, 3) == ["pass"] * 3


def test_exact_noisy_judge_flips_exactly_its_share() -> None:
    """``exact``: of every 10 verdicts at 0.1 exactly one is flipped, at seeded places; a share
    that no block up to 100 makes whole is carried on, so the total stays within one."""
    quirks = {"noisy_verdicts": {"fraction": 0.1, "seed": 5, "exact": True}}
    runs = []
    for _ in range(2):
        with LLMServer([{"tool_calls": [PASS]}], quirks=quirks) as server:
            runs.append(_verdicts(server, 60))
            assert server.quirks.noisy_verdicts is not None
            assert server.quirks.noisy_verdicts.flipped == 6
    assert runs[0] == runs[1]  # same seed, same places
    assert [runs[0][i : i + 10].count("fail") for i in range(0, 60, 10)] == [1] * 6
    assert runs[0] != ["pass"] * 9 + ["fail"]  # not a fixed place: seeded
    odd = NoisyVerdicts(1 / 3, seed=2, exact=True)
    call = ToolCall("submit_verdict", json.dumps(PASS["arguments"]))
    flips = [odd.apply(Reply(text="", tool_calls=(call,))) for _ in range(250)]
    assert odd.seen == 250 and abs(odd.flipped - 250 / 3) <= 1
    assert sum("fail" in r.tool_calls[0].arguments for r in flips) == odd.flipped
    assert odd.answers[0][0] == "pass" and odd.answers[0][2] == "booked"
    assert sum(sent == "fail" for _, sent, _ in odd.answers) == odd.flipped
    with pytest.raises(RuleError, match="'exact' must be true/false"):
        LLMServer(quirks={"noisy_verdicts": {"fraction": 0.1, "exact": "yes"}})


def test_quirks_in_a_rules_file_and_their_errors(tmp_path: Path) -> None:
    good = tmp_path / "llama.yaml"
    good.write_text(
        "server: {like: llama-server, delay: 0}\n"
        "rules:\n  - {tool_choice: submit_verdict, tool_calls: [{name: submit_verdict}]}\n"
        "default_text: plain words\n",
        encoding="utf-8",
    )
    with LLMServer.from_file(good) as server:
        assert streamed(server, tools=VERDICT_TOOL, tool_choice=NAMED)[0] == "plain words"
    bad = tmp_path / "bad.yaml"
    bad.write_text("server: {named_tool_choise: ignore}\nrules: []\n", encoding="utf-8")
    with pytest.raises(RuleError, match=r"bad.yaml: server: unknown key\(s\) named_tool_choise"):
        LLMServer.from_file(bad)
    with pytest.raises(RuleError, match=r"'fraction' must be 0\.\.1"):
        LLMServer(quirks={"noisy_verdicts": {"fraction": 2}})
    with pytest.raises(RuleError, match="tool_calls_as_text"):
        LLMServer([{"tool_calls_as_text": "yaml"}])
    proc = subprocess.run(
        [sys.executable, "-m", "lkeval.testing.llm_server", "--rules", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "named_tool_choise" in proc.stderr


def test_livekit_inference_llm_reaches_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """LiveKit Inference model strings, redirected by LIVEKIT_INFERENCE_URL (docs/protocol.md)."""
    from livekit.agents import inference
    from livekit.agents.llm import ChatContext

    with LLMServer([{"model": "openai/gpt-4.1-mini", "text": "from inference"}]) as server:
        monkeypatch.setenv("LIVEKIT_INFERENCE_URL", server.base_url)
        monkeypatch.setenv("LIVEKIT_API_KEY", "devkey")
        monkeypatch.setenv("LIVEKIT_API_SECRET", "devsecret-devsecret-devsecret-00")

        async def ask() -> str:
            model = inference.LLM("openai/gpt-4.1-mini")
            ctx = ChatContext()
            ctx.add_message(role="user", content="hi")
            text = ""
            async with model.chat(chat_ctx=ctx) as stream:
                async for chunk in stream:
                    text += (chunk.delta and chunk.delta.content) or ""
            return text

        assert asyncio.run(ask()) == "from inference"
        (request,) = server.requests
        models = httpx.get(f"{server.base_url}/models").json()["data"]
    assert "openai/gpt-4.1-mini" in [m["id"] for m in models]
    auth = request.authorization or ""
    assert auth.startswith("Bearer ") and auth.count(".") == 2
    claims = auth.split(".")[1]
    claims_json = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
    assert claims_json["iss"] == "devkey"
    assert request.path.endswith("/chat/completions")


def test_a_rule_naming_the_only_tool_matches_required_too() -> None:
    rules = [{"tool_choice": "submit_verdict", "tool_calls": [PASS]}, {"text": "no rule"}]
    with LLMServer(rules) as server:
        forced = sdk(server).chat.completions.create(
            model="m", messages=USER, tools=VERDICT_TOOL, tool_choice="required"
        )
        two_tools = [*VERDICT_TOOL, {**VERDICT_TOOL[0], "function": {"name": "other"}}]
        other = sdk(server).chat.completions.create(
            model="m", messages=USER, tools=two_tools, tool_choice="required"
        )
    assert forced.choices[0].message.tool_calls
    assert other.choices[0].message.content == "no rule"  # "required" among two: not forced
