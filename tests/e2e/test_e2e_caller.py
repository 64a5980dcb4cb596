"""The simulated caller against the real example agent: what a weak caller model does wrong
never reaches the agent as speech, and never passes a scenario (issue 10 item 5)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import HOTEL, hotel_env, read_json, run_argv, run_lkeval

from lkeval.testing.llm_rules import read_rules_file
from lkeval.testing.llm_server import LLMServer

pytestmark = pytest.mark.e2e

HOTEL_RULES, _ = read_rules_file(HOTEL / "llm_rules.yaml")
AGENT_RULES = [r for r in HOTEL_RULES if r.get("model") == "hotel-agent"]
JUDGE_RULES = [r for r in HOTEL_RULES if r.get("model") == "judge"]
END = {"name": "end_call", "arguments": {"reason": "the room is booked"}}


def run_with_caller(
    tmp_path: Path,
    caller_rules: Sequence[Any],
    agent_rules: Sequence[dict[str, Any]] = (),
    max_turns: int = 4,
) -> tuple[Any, Any]:
    scenarios = tmp_path / "scenarios.yaml"
    scenarios.write_text(
        yaml.safe_dump(
            {
                "name": "Caller",
                "scenarios": [
                    {
                        "id": "book",
                        "label": "Book",
                        "instructions": "You are Ada. Book a double room for two nights.",
                        "agent_expectations": "The agent books the room.",
                    }
                ],
            }
        )
    )
    results = tmp_path / "results.json"
    with LLMServer([*agent_rules, *AGENT_RULES, *caller_rules, *JUDGE_RULES]) as llm:
        argv = [*run_argv(HOTEL / "agent.py", scenarios, results)]
        argv += [
            "--caller-model",
            "caller",
            "--judge-model",
            "judge",
            "--max-turns",
            str(max_turns),
        ]
        proc = run_lkeval(argv, hotel_env(llm))
        caller_requests = [r.body for r in llm.requests if r.body.get("model") == "caller"]
    (scenario,) = read_json(results)["scenarios"]
    assert caller_requests, proc.stdout + proc.stderr
    return scenario, caller_requests


def test_end_call_written_as_text_ends_the_call_and_is_never_spoken(tmp_path: Path) -> None:
    caller = [
        {
            "model": "caller",
            "last_user": "good news",
            "text": "Great, please book it for Ada. Bye!",
            "tool_calls": [END],
            "tool_calls_as_text": "json",
        },
        {"model": "caller", "last_user": "welcome", "text": "Hi, is a double room free?"},
    ]
    scenario, requests = run_with_caller(tmp_path, caller)
    attempt = scenario["attempts"][0]
    said = [i["text"] for i in attempt["transcript"] if i.get("role") == "user"]
    assert said == ["Hi, is a double room free?", "Great, please book it for Ada. Bye!"]
    assert attempt["end_reason"] == "the simulated user ended the call: the room is booked"
    # the opening note is in the caller's system prompt: its first request has no user turn
    # other than the agent's greeting
    first = requests[0]["messages"]
    assert [m["role"] for m in first] == ["system", "user"]
    assert first[1]["content"].startswith("Welcome to Hotel Example")
    assert requests[0]["temperature"] == 0.7


def test_a_caller_that_only_echoes_the_agent_is_an_error_not_a_verdict(tmp_path: Path) -> None:
    scenario, _ = run_with_caller(tmp_path, [{"model": "caller", "text": "{last_user}"}])
    assert scenario["status"] == "error", scenario
    assert scenario["reason"].startswith("the simulated caller broke role: its message 1 of")
    assert "Welcome to Hotel Example! How can I help?" in scenario["reason"]
    assert not [v for v in scenario["attempts"][0]["verdicts"] if v["source"] == "judge"]


def test_a_small_models_caller_speaking_as_the_agent_is_an_error_and_ends_the_call(
    tmp_path: Path,
) -> None:
    """Issue 33.8: a 1.5B caller's first line was the agent's; the call went on regardless."""
    caller = [{"model": "caller", "text": "Hello! How can I assist you today?"}]
    scenario, _ = run_with_caller(tmp_path, caller, max_turns=8)
    attempt = scenario["attempts"][0]
    assert scenario["status"] == "error", scenario
    assert scenario["reason"].startswith("the simulated caller broke role: its message 1 of 1")
    said = [i["text"] for i in attempt["transcript"] if i.get("role") == "user"]
    assert said == ["Hello! How can I assist you today?"]
    assert attempt["end_reason"].endswith("it spoke as the agent")


def test_a_caller_in_a_loop_is_an_error_and_ends_at_the_third_repeat(tmp_path: Path) -> None:
    """Issue 33.8: then it repeated one line five times and never ended the call."""
    loop = "I would like to know more about your services."
    agent = [
        {"model": "hotel-agent", "last_user": "services", "times": 1, "text": text}
        for text in ("We have rooms and a spa.", "Which would you like?", "Tell me more?")
    ]
    caller = [
        {"model": "caller", "last_user": "welcome", "text": "Hi, I need a double room."},
        {"model": "caller", "text": loop},
    ]
    scenario, _ = run_with_caller(tmp_path, caller, agent, max_turns=8)
    attempt = scenario["attempts"][0]
    assert scenario["status"] == "error", scenario
    assert scenario["reason"] == (
        f"the simulated caller broke role: it said {loop!r} 3 times in a row while the agent "
        "moved on"
    )
    said = [i["text"] for i in attempt["transcript"] if i.get("role") == "user"]
    assert said.count(loop) == 3  # the loop ended the call, not --max-turns
    assert attempt["end_reason"].endswith("it said the same line 3 times")


def test_an_agent_that_speaks_a_tool_call_as_text_fails(tmp_path: Path) -> None:
    spoken = '{"name": "book_room", "arguments": {"guest_name": "Ada"}}'
    agent: list[dict[str, Any]] = [
        {"model": "hotel-agent", "last_user": "double room", "text": spoken}
    ]
    caller = [
        {"model": "caller", "last_user": "welcome", "text": "Hi, is a double room free?"},
        {"model": "caller", "tool_calls": [END], "text": "Thanks, bye."},
    ]
    scenario, _ = run_with_caller(tmp_path, caller, agent)
    attempt = scenario["attempts"][0]
    assert scenario["status"] == "failed", scenario  # the judge here passes everything
    marked = [i for i in attempt["transcript"] if i.get("spoken_call")]
    assert [(i["role"], i["spoken_call"], i["text"]) for i in marked] == [
        ("assistant", "book_room", spoken)
    ]
    verdicts = {v["source"]: v["verdict"] for v in attempt["verdicts"]}
    assert verdicts["tool-calls"] == "fail" and verdicts["judge"] == "pass"
    assert "spoke a tool call to the caller as text" in scenario["reason"]
