"""The LLM evaluator keeps every verdict it had when one judge fails (issue 18 item 12)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from lkeval.llm.config import LLMEndpointOptions, LLMOptions, resolve_llm_spec
from lkeval.llm.evaluator import LLMEvaluator
from lkeval.results.model import TranscriptItem, Verdict
from lkeval.run.collaborators import JudgingFailed
from lkeval.scenarios.model import Scenario
from lkeval.testing.llm_server import LLMServer

SAID = "You said: hello"
TRANSCRIPT = [
    TranscriptItem("message", 0, role="assistant", text=SAID),
    TranscriptItem("message", 1, role="user", text=SAID),  # the caller echoes once: a flag
    TranscriptItem("message", 1, role="assistant", text=SAID),
    TranscriptItem("message", 2, role="user", text="I'd like to book a room."),
    TranscriptItem("message", 2, role="assistant", text="You said: I'd like to book a room."),
]
SCENARIO = Scenario(
    id="s",
    label="s",
    instructions="Book a room.",
    agent_expectations="Books it.",
    group_id="g",
    group_name="g",
    file="f.yaml",
    line=1,
    id_derived=False,
    judges=("tool_use",),
)


def verdict(value: str, why: str, **match: object) -> dict[str, object]:
    call = {"name": "submit_verdict", "arguments": {"reasoning": why, "verdict": value}}
    return {"tool_choice": "required", "tool_calls": [call], **match}


def judge_with(server: LLMServer, **options: object) -> list[Verdict]:
    flags = LLMOptions(
        caller=LLMEndpointOptions(model="c", base_url=server.base_url),
        judge=LLMEndpointOptions(model="j", base_url=server.base_url),
    )
    caller, judge = (
        replace(resolve_llm_spec(r, flags, {}), retry_delay=0.01, max_retries=0)
        for r in ("caller", "judge")
    )
    evaluator = LLMEvaluator(caller, judge, judge_scripted=False, environ={}, **options)  # type: ignore[arg-type]

    async def main() -> list[Verdict]:
        try:
            return await evaluator.judge(SCENARIO, TRANSCRIPT, {})
        finally:
            await evaluator.aclose()

    return asyncio.run(main())


def test_a_failing_builtin_judge_keeps_the_main_verdict_and_the_caller_flag() -> None:
    rules = [
        {"last_user": "behave safely", "text": "Seems safe enough, I suppose."},  # no verdict
        verdict("fail", "no tool was used", last_user="use tools correctly"),
        verdict("pass", "booked"),
    ]
    with LLMServer(rules) as server, pytest.raises(JudgingFailed) as caught:
        judge_with(server, run_judges=("safety",))
    kept = [(v.source, v.verdict) for v in caught.value.verdicts]
    assert kept == [("caller", "pass"), ("judge", "pass"), ("judge:tool_use", "fail")]
    assert str(caught.value).startswith("judge:safety: "), caught.value


def test_a_failing_main_judge_keeps_the_builtin_verdicts() -> None:
    rules = [
        verdict("pass", "fine", last_user="use tools correctly"),
        {"status": 500, "text": "main judge exploded"},
    ]
    with LLMServer(rules) as server, pytest.raises(JudgingFailed) as caught:
        judge_with(server)
    kept = [(v.source, v.verdict) for v in caught.value.verdicts]
    assert kept == [("caller", "pass"), ("judge:tool_use", "pass")]
