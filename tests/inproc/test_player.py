"""The in-process player: a real agent module imported into the test's interpreter, its own
entrypoint and ``on_simulation_end`` unchanged, played through ``lkeval run``'s attempt.

The agent (tests/agents/sim_end_agent.py) scripts its replies in ``llm_node`` and records every
``on_simulation_end`` call with the provisional verdict it was handed, so these tests see what
the agent saw, not only what lk-eval reports.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import HOTEL, TEST_AGENTS

from lkeval.agents.process import MOCK_TOOLS_REASON
from lkeval.inproc import PlayOptions, play_scenario
from lkeval.inproc.agent import AUDIO_REFUSED
from lkeval.results.model import ScenarioResult
from lkeval.scenarios.loader import load_or_raise
from lkeval.scenarios.model import Scenario

AGENT = TEST_AGENTS / "sim_end_agent.py"


def _scenario(tmp_path: Path, **fields: Any) -> Scenario:
    path = tmp_path / "scenarios.yaml"
    body = {"id": "SCN_echo", "label": "Echo", "instructions": "Say hi.", **fields}
    path.write_text(yaml.safe_dump({"name": "Echo", "scenarios": [body]}), encoding="utf-8")
    groups, _ = load_or_raise([path])
    return groups[0].scenarios[0]


def _play(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **fields: Any) -> ScenarioResult:
    monkeypatch.setenv("SIM_END_LOG", str(tmp_path / "sim_end.jsonl"))
    options = PlayOptions(logs_dir=tmp_path / "logs", boot_timeout=60, turn_timeout=30)
    return play_scenario(AGENT, _scenario(tmp_path, **fields), options)


def _ends(tmp_path: Path) -> list[dict[str, Any]]:
    log = tmp_path / "sim_end.jsonl"
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return [json.loads(line) for line in lines]


TURNS = [
    {"expect": [{"contains": {"message": {"contains": "echo desk"}}}]},
    {"user": "Book it", "expect": [{"message": {"contains": "You said: Book it"}}]},
]


def test_a_scripted_scenario_passes_and_on_simulation_end_gets_the_verdict_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _play(tmp_path, monkeypatch, turns=TURNS)
    assert result.status == "passed", result.reason
    attempt = result.attempts[-1]
    said = [(i.role, i.text) for i in attempt.transcript if i.kind == "message"]
    assert said == [
        ("assistant", "Hello, echo desk."),
        ("user", "Book it"),
        ("assistant", "You said: Book it."),
    ]
    assert _ends(tmp_path) == [{"success": True, "reason": ""}]
    assert attempt.agent_check == "passed (no veto)"
    assert attempt.start_mode == "in-process"
    assert attempt.speed_patches["tool_schemas"].startswith("on")  # the schema cache applies
    log = Path(attempt.log_path or "").read_text(encoding="utf-8")
    assert "INFO sim-end-agent: echo desk open for" in log  # the agent's own log lines


def test_a_failed_check_fails_and_the_agent_is_told_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns = [{"user": "Book it", "expect": [{"message": {"contains": "confirmed"}}]}]
    result = _play(tmp_path, monkeypatch, turns=turns)
    assert result.status == "failed"
    assert "confirmed" in result.reason
    (end,) = _ends(tmp_path)
    assert end["success"] is False and "confirmed" in end["reason"]


def test_the_agents_veto_fails_a_scenario_its_checks_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _play(tmp_path, monkeypatch, turns=TURNS, userdata={"veto": "booked for Ada"})
    assert result.status == "failed"
    assert "agent veto: booked for Ada" in result.reason
    verdicts = {v.source: v.verdict for v in result.attempts[-1].verdicts}
    assert verdicts == {"scripted": "pass", "agent": "fail"}
    assert _ends(tmp_path) == [{"success": True, "reason": ""}]


def test_an_entrypoint_that_raises_is_the_scenarios_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _play(tmp_path, monkeypatch, turns=TURNS, userdata={"crash": True})
    assert result.status == "error"
    assert "entrypoint raised RuntimeError: the echo desk is closed" in result.reason
    assert _ends(tmp_path) == []


def test_an_audio_scenario_is_not_played_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _play(tmp_path, monkeypatch, turns=TURNS, mode="audio")
    assert result.status == "error"
    assert AUDIO_REFUSED in result.reason


def test_an_agent_that_hangs_up_cannot_pass_and_is_not_asked_its_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns = [{"user": "Thanks, bye"}, {"user": "Still there?"}]
    result = _play(tmp_path, monkeypatch, turns=turns)
    assert result.status != "passed"
    assert "the agent ended the session" in result.reason
    assert "its own verdict (finalize_simulation / on_simulation_end) could not be asked" in (
        result.reason
    )
    assert _ends(tmp_path) == []  # ctx.shutdown() ended the job: nothing left to ask


def test_mock_tools_replace_a_tool_in_process_and_a_wrong_name_is_the_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lkeval.testing.llm_server import LLMServer

    mocked = {"check_availability": [{"output": "0 double rooms (from the mock)"}]}
    seen = {"contains": {"function_call_output": {"output_contains": "from the mock"}}}
    turns = [{"user": "Is a double room free for two nights?", "expect": [seen]}]
    with LLMServer.from_file(HOTEL / "llm_rules.yaml") as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        monkeypatch.setenv("HOTEL_AGENT_MODEL", "hotel-agent")
        options = PlayOptions(logs_dir=tmp_path / "logs", boot_timeout=60, turn_timeout=30)
        hotel = HOTEL / "agent.py"
        passed = play_scenario(hotel, _scenario(tmp_path, turns=turns, mock_tools=mocked), options)
        wrong = {"check_availabilty": [{"output": "x"}]}
        refused = play_scenario(hotel, _scenario(tmp_path, turns=turns, mock_tools=wrong), options)
    assert passed.status == "passed", passed.reason
    assert refused.status == "error"
    assert f"{MOCK_TOOLS_REASON} unknown tool 'check_availabilty'" in refused.reason
