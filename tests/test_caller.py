"""The simulated caller against a real (scripted) OpenAI-compatible server over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from lkeval.llm.caller import CallerTurn, SimulatedCaller
from lkeval.llm.client import LLMError
from lkeval.llm.config import LLMSpec, build_llm, resolve_llm_spec
from lkeval.results.model import TranscriptItem
from lkeval.testing.llm_server import LLMServer

INSTRUCTIONS = "You are Ana. Book a double room for May 3rd. Say goodbye once it is booked."
GREETING = TranscriptItem("message", 0, role="assistant", text="Hotel Aurora, how can I help?")


@pytest.fixture
def srv() -> Iterator[LLMServer]:
    with LLMServer() as server:
        yield server


def spec_for(server: LLMServer, **overrides: Any) -> LLMSpec:
    flags = {"caller_model": "lkeval-scripted", "caller_base_url": server.base_url}
    spec = resolve_llm_spec("caller", flags, environ={})
    return replace(spec, **{"retry_delay": 0.01, **overrides})


def play(spec: LLMSpec, transcripts: list[list[TranscriptItem]]) -> list[CallerTurn]:
    """Ask one caller for its next move after each transcript, in order."""

    async def main() -> list[CallerTurn]:
        llm = build_llm(spec, environ={})
        try:
            caller = SimulatedCaller(llm, spec, INSTRUCTIONS)
            return [await caller.next_message(t) for t in transcripts]
        finally:
            await llm.aclose()

    return asyncio.run(main())


def test_caller_talks_then_ends_the_call_with_a_goodbye(srv: LLMServer) -> None:
    srv.set_rules(
        [
            {"last_user": "how can I help", "text": "Hi, I'd like a double room for May 3rd."},
            {
                "last_user": "is booked",
                "text": "Great, thanks. Bye!",
                "tool_calls": [{"name": "end_call", "arguments": {"reason": "room booked"}}],
            },
        ]
    )
    first = [GREETING]
    second = [
        *first,
        TranscriptItem("message", 1, role="user", text="Hi, I'd like a double room for May 3rd."),
        TranscriptItem("function_call", 1, name="secret_lookup", arguments='{"x": 1}'),
        TranscriptItem("function_call_output", 1, name="secret_lookup", output="internal-data"),
        TranscriptItem("message", 1, role="assistant", text="Done."),
        TranscriptItem("message", 1, role="assistant", text="Your room is booked."),
    ]
    turn1, turn2 = play(spec_for(srv), [first, second])

    assert turn1.text == "Hi, I'd like a double room for May 3rd."
    assert not turn1.ended and turn1.reason == ""
    assert turn2 == CallerTurn("Great, thanks. Bye!", True, "room booked", turn2.usage)
    assert turn1.usage.input_tokens > 0 and turn2.usage.output_tokens > 0

    body = srv.requests[1].body
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "user"]  # agent = user, caller = assistant
    assert INSTRUCTIONS in body["messages"][0]["content"]
    assert body["messages"][3]["content"] == "Done.\nYour room is booked."  # merged agent turn
    assert "secret_lookup" not in str(body["messages"]) and "internal-data" not in str(body)
    assert [t["function"]["name"] for t in body["tools"]] == ["end_call"]
    assert "tool_choice" not in body or body["tool_choice"] == "auto"


def test_caller_that_never_ends_keeps_producing_messages(srv: LLMServer) -> None:
    srv.set_rules([{"text": 'Caller: "And what about breakfast?"'}])
    transcript = [GREETING]
    turns = []
    for _ in range(4):
        (turn,) = play(spec_for(srv), [transcript])
        turns.append(turn)
        transcript = [
            *transcript,
            TranscriptItem("message", len(turns), role="user", text=turn.text or ""),
            TranscriptItem("message", len(turns), role="assistant", text="Breakfast is at 7."),
        ]
    assert all(t.text == "And what about breakfast?" and not t.ended for t in turns)
    assert len(srv.requests[-1].body["messages"]) == 1 + 1 + 2 * 3


def test_end_call_without_a_message(srv: LLMServer) -> None:
    srv.set_rules([{"tool_calls": [{"name": "end_call", "arguments": {"reason": "gave up"}}]}])
    (turn,) = play(spec_for(srv), [[GREETING]])
    assert (turn.text, turn.ended, turn.reason) == (None, True, "gave up")


def test_caller_opens_when_the_agent_has_not_spoken(srv: LLMServer) -> None:
    srv.set_rules([{"turn": 1, "text": "Hello?"}])
    (turn,) = play(spec_for(srv), [[]])
    assert turn.text == "Hello?"
    messages = srv.requests[0].body["messages"]
    assert messages[1]["role"] == "user" and "Start the conversation" in messages[1]["content"]


def test_unanswered_caller_message_is_marked(srv: LLMServer) -> None:
    transcript = [GREETING, TranscriptItem("message", 1, role="user", text="Anyone there?")]
    play(spec_for(srv), [transcript])
    messages = srv.requests[0].body["messages"]
    assert messages[-1] == {"role": "user", "content": "(The agent did not reply.)"}


def test_an_empty_reply_is_retried_once_then_ends_the_call(srv: LLMServer) -> None:
    srv.set_rules([{"text": ""}])
    (turn,) = play(spec_for(srv), [[GREETING]])
    assert turn.ended and turn.text is None and "nothing more to say" in turn.reason
    assert len(srv.requests) == 2
    assert turn.usage.input_tokens > 0


def test_caller_llm_failure_is_an_llm_error(srv: LLMServer) -> None:
    srv.set_rules([{"status": 502}])
    with pytest.raises(LLMError, match=r"caller LLM lkeval-scripted .*HTTP 502"):
        play(spec_for(srv, max_retries=1), [[GREETING]])
