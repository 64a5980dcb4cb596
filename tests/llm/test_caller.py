"""The simulated caller against a real (scripted) OpenAI-compatible server over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from lkeval.llm.caller import CallerTurn, SimulatedCaller
from lkeval.llm.caller_role import caller_flag, role_break
from lkeval.llm.client import LLMError, build_llm
from lkeval.llm.config import LLMEndpointOptions, LLMOptions, LLMSpec, resolve_llm_spec
from lkeval.llm.evaluator import LLMEvaluator
from lkeval.results.model import TranscriptItem, Verdict
from lkeval.scenarios.model import Scenario
from lkeval.testing.llm_server import LLMServer

INSTRUCTIONS = "You are Ana. Book a double room for May 3rd. Say goodbye once it is booked."
GREETING = TranscriptItem("message", 0, role="assistant", text="Hotel Aurora, how can I help?")


@pytest.fixture
def srv() -> Iterator[LLMServer]:
    with LLMServer() as server:
        yield server


def spec_for(server: LLMServer, **overrides: Any) -> LLMSpec:
    flags = LLMOptions(caller=LLMEndpointOptions(model="lkeval-scripted", base_url=server.base_url))
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


ASKED = [
    GREETING,
    TranscriptItem("message", 1, role="user", text="A double room for May 3rd, please."),
    TranscriptItem("message", 1, role="assistant", text="Sorry, we are full."),
]
END = {"name": "end_call", "arguments": {"reason": "gave up"}}


def test_end_call_without_a_message(srv: LLMServer) -> None:
    srv.set_rules([{"tool_calls": [END]}])
    (turn,) = play(spec_for(srv), [ASKED])
    assert (turn.text, turn.ended, turn.reason) == (None, True, "gave up")


def test_the_caller_cannot_hang_up_before_it_has_tried_its_goal(srv: LLMServer) -> None:
    srv.set_rules([{"tool_calls": [END], "times": 1}, {"text": "Hi, a double room please."}])
    (turn,) = play(spec_for(srv), [[GREETING]])
    assert (turn.text, turn.ended) == ("Hi, a double room please.", False)
    first, second = (r.body["messages"][0]["content"] for r in srv.requests)
    assert "cannot end now" not in first and "cannot end now" in second


def test_a_caller_that_insists_on_hanging_up_at_once_ends_without_a_line(srv: LLMServer) -> None:
    srv.set_rules([{"tool_calls": [END]}])
    (turn,) = play(spec_for(srv), [[GREETING]])
    assert (turn.text, turn.ended) == (None, True)
    assert turn.reason == "gave up (before trying its goal)"
    assert len(srv.requests) == 2


def test_a_goodbye_with_an_early_end_call_is_said_and_the_call_goes_on(srv: LLMServer) -> None:
    srv.set_rules([{"text": "Hi, is a room free?", "tool_calls": [END]}])
    (turn,) = play(spec_for(srv), [[GREETING]])
    assert (turn.text, turn.ended) == ("Hi, is a room free?", False)


@pytest.mark.parametrize("style", ["json", "fenced"])
def test_end_call_written_as_json_text_ends_the_call_and_is_never_said(
    srv: LLMServer, style: str
) -> None:
    # a weak model on llama-server writes its tool call into the content
    srv.set_rules([{"text": "Thanks, bye!", "tool_calls": [END], "tool_calls_as_text": style}])
    (turn,) = play(spec_for(srv), [ASKED])
    assert (turn.text, turn.ended, turn.reason) == ("Thanks, bye!", True, "gave up")


@pytest.mark.parametrize(
    ("text", "said", "reason"),
    [
        ('Okay, goodbye. end_call(reason="no rooms")', "Okay, goodbye.", "no rooms"),
        ("[end_call]", None, "caller ended the call"),
        ('{"name": "end_call", "arguments": "{\\"reason\\": \\"done\\"}"}', None, "done"),
        ('{"function": {"name": "end_call", "arguments": {}}} Bye.', "Bye.", "caller ended"),
    ],
)
def test_end_call_in_other_written_forms(
    srv: LLMServer, text: str, said: str | None, reason: str
) -> None:
    srv.set_rules([{"text": text}])
    (turn,) = play(spec_for(srv), [ASKED])
    assert turn.ended and turn.text == said and turn.reason.startswith(reason)


def test_caller_opens_when_the_agent_has_not_spoken(srv: LLMServer) -> None:
    srv.set_rules([{"turn": 0, "text": "Hello?"}])
    (turn,) = play(spec_for(srv), [[]])
    assert turn.text == "Hello?"
    messages = srv.requests[0].body["messages"]
    # the opening note is in the system prompt: no invented user turn
    assert [m["role"] for m in messages] == ["system"]
    assert "you speak first" in messages[0]["content"]


def test_the_caller_samples_at_a_temperature_above_zero_by_default(srv: LLMServer) -> None:
    at_srv = LLMEndpointOptions(model="m", base_url=srv.base_url)
    spec = resolve_llm_spec("caller", LLMOptions(caller=at_srv), {})
    assert spec.temperature is not None and spec.temperature > 0
    play(spec_for(srv), [ASKED])
    assert srv.requests[0].body["temperature"] == spec.temperature
    flags = LLMOptions(caller=at_srv, caller_temperature=0.0)
    assert resolve_llm_spec("caller", flags, {}).temperature == 0.0
    env = {"LKEVAL_CALLER_TEMPERATURE": "1.1"}
    model_m = LLMEndpointOptions(model="m")
    assert resolve_llm_spec("caller", LLMOptions(caller=model_m), env).temperature == 1.1
    assert resolve_llm_spec("judge", LLMOptions(judge=model_m), {}).temperature == 0.0


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


def convo(*lines: tuple[str, str]) -> list[TranscriptItem]:
    """Alternating agent/caller lines; the caller's line of turn N is turn N."""
    items, turn = [], 0
    for role, text in lines:
        turn += role == "user"
        items.append(TranscriptItem("message", turn, role=role, text=text))
    return items


AGENT_SAYS = "Hotel Aurora, how can I help you today?"


def test_a_caller_that_only_echoes_the_agent_is_not_judged() -> None:
    echo = convo(
        ("assistant", AGENT_SAYS),
        ("user", "Hotel Aurora, how can I help you today?"),
        ("assistant", "Sorry, could you repeat that?"),
        ("user", "Sorry, could you repeat that"),
    )
    why = role_break(echo, 1, INSTRUCTIONS)
    assert why is not None and why.startswith("its message 1 of 2 is the agent's line")
    short = convo(("assistant", "Sorry?"), ("user", "Sorry?"))
    assert role_break(short, 1, INSTRUCTIONS) == (
        "none of its 1 message(s) played its instructions (echoes or JSON)"
    )


def test_a_caller_sending_json_is_flagged_and_a_single_slip_only_noted() -> None:
    slip = convo(
        ("assistant", AGENT_SAYS),
        ("user", '```json\n{"message": "I need a room"}\n```'),
        ("assistant", "For which date?"),
        ("user", "May 3rd, for two nights please."),
    )
    flag = caller_flag(slip, first_turn=1)
    assert flag == Verdict(
        "caller", "pass", "flag: the simulated caller sent JSON in 1 of 2 message(s)"
    )
    fine = convo(("assistant", AGENT_SAYS), ("user", "A double room for May 3rd, please."))
    assert caller_flag(fine, first_turn=1) is None
    # scripted lines (before first_turn) are the scenario author's, not the caller's
    assert caller_flag([*fine[:1], *echo_line(1), *fine[1:]], first_turn=2) is None


def echo_line(turn: int) -> list[TranscriptItem]:
    return [TranscriptItem("message", turn, role="user", text=AGENT_SAYS)]


def evaluate(
    srv: LLMServer, transcript: list[TranscriptItem], instructions: str = "Book a room."
) -> tuple[list[Verdict], LLMEvaluator]:
    """The evaluator's verdicts on ``transcript`` (caller and judge at ``srv``)."""
    flags = LLMOptions(
        caller=LLMEndpointOptions(model="c", base_url=srv.base_url),
        judge=LLMEndpointOptions(model="j", base_url=srv.base_url),
    )
    caller, judge = (resolve_llm_spec(r, flags, {}) for r in ("caller", "judge"))
    evaluator = LLMEvaluator(caller, judge, judge_scripted=False, environ={})
    scenario = Scenario(
        id="s",
        label="s",
        instructions=instructions,
        agent_expectations="Books it.",
        group_id="g",
        group_name="g",
        file="f.yaml",
        line=1,
        id_derived=False,
    )

    async def main() -> list[Verdict]:
        try:
            return await evaluator.judge(scenario, transcript, {})
        finally:
            await evaluator.aclose()

    return asyncio.run(main()), evaluator


def test_the_evaluator_records_the_flag_among_the_verdicts(srv: LLMServer) -> None:
    srv.set_rules(
        [
            {
                "tool_choice": "required",
                "tool_calls": [
                    {"name": "submit_verdict", "arguments": {"reasoning": "ok", "verdict": "pass"}}
                ],
            },
        ]
    )
    echo = convo(
        ("assistant", "For which date?"),
        ("user", "For which date?"),
        ("assistant", "Sorry, for which date?"),
        ("user", "May 3rd, a room for two."),
    )
    verdicts, evaluator = evaluate(srv, echo)
    assert [v.source for v in verdicts] == ["caller", "judge"]
    assert verdicts[0] == Verdict(
        "caller", "pass", "flag: the simulated caller echoed the agent in 1 of 2 message(s)"
    )
    assert evaluator.passes(verdicts)[0]  # a slip in a call that was played is only noted
