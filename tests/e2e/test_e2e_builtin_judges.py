"""LiveKit's built-in judges on a real agent: they see its instructions, and their log lines
stay out of the terminal display (issue 10 item 13)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import HOTEL, hotel_env, read_json, run_argv, run_lkeval

from lkeval.testing.llm_rules import read_rules_file
from lkeval.testing.llm_server import LLMServer

pytestmark = pytest.mark.e2e

HOTEL_RULES, _ = read_rules_file(HOTEL / "llm_rules.yaml")
FRONT_DESK = "You are the front desk of Hotel Example"


def verdict(value: str, reasoning: str) -> list[dict[str, object]]:
    args = {"reasoning": reasoning, "verdict": value}
    return [{"name": "submit_verdict", "arguments": args}]


def test_task_completion_judges_with_the_agents_instructions(tmp_path: Path) -> None:
    rules = [
        # task_completion's prompt carries the agent's instructions when it found them
        {
            "model": "judge",
            "tool_choice": "required",
            "last_user": f"Agent Instructions:\n{FRONT_DESK}",
            "tool_calls": verdict("pass", "saw the instructions"),
        },
        {
            "model": "judge",
            "tool_choice": "required",
            "last_user": "Evaluate if the agent completed its goal",
            "tool_calls": verdict("fail", "judged blind"),
        },
        *HOTEL_RULES,
    ]
    results = tmp_path / "results.json"
    with LLMServer(rules) as llm:
        argv = [*run_argv(HOTEL / "agent.py", HOTEL / "scenarios.yaml", results)]
        argv += ["--judge-model", "judge", "--judges", "task_completion"]
        argv += ["--match", "Checks double room availability"]
        proc = run_lkeval(argv, hotel_env(llm))
        prompts = [str(r.body["messages"]) for r in llm.requests if r.body["model"] == "judge"]
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    (scenario,) = [s for s in read_json(results)["scenarios"] if s["status"] != "skipped"]
    verdicts = {v["source"]: v for v in scenario["attempts"][0]["verdicts"]}
    assert verdicts["judge:task_completion"]["verdict"] == "pass", verdicts
    assert any(FRONT_DESK in p for p in prompts)
    assert "no instructions found" not in output
    assert proc.stdout.splitlines()[0].startswith("LLMs: judge judge at 127.0.0.1:")
