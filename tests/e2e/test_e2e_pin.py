"""End to end: a failed simulated conversation of the example agent, pinned with ``lkeval pin``,
fails the same way against the same agent and passes once the agent is fixed.

The agent's LLM is the example's local server; "broken" is the same agent whose model books a
suite where the guest asked for a double room, which its own ``on_simulation_end`` vetoes
against the scenario's ``userdata``. The simulated caller's lines become the pinned scenario's
scripted turns, so the pinned run says the same words whatever the caller would sample.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from conftest import HOTEL, hotel_env, read_json, run_argv, run_lkeval

from lkeval.testing.llm_rules import read_rules_file
from lkeval.testing.llm_server import LLMServer

pytestmark = pytest.mark.e2e

HOTEL_RULES, _ = read_rules_file(HOTEL / "llm_rules.yaml")


def broken_agent_rules() -> list[dict]:
    """The example agent's rules again as model ``hotel-agent-broken``, booking a suite."""
    broken = []
    for rule in HOTEL_RULES:
        if rule.get("model") != "hotel-agent":
            continue
        rule = copy.deepcopy(dict(rule))
        rule["model"] = "hotel-agent-broken"
        for call in rule.get("tool_calls", ()):
            if call["name"] == "book_room":
                call["arguments"]["room_type"] = "suite"
        broken.append(rule)
    return broken


SCENARIOS = """\
name: Pinning
scenarios:
  - id: SCN_simAda
    label: Ada books a double room
    instructions: You are Ada. Book a double room for two nights.
    agent_expectations: The agent books a double room for Ada.
    userdata:
      guest: Ada
      expected_booking: {guest: Ada, room_type: double, nights: 2}
"""


def play(tmp_path: Path, llm: LLMServer, scenarios: Path, model: str, name: str) -> dict:
    results = tmp_path / f"{name}.json"
    argv = run_argv(HOTEL / "agent.py", scenarios, results)
    argv += ["--caller-model", "caller", "--judge-model", "judge", "--no-github"]
    proc = run_lkeval(argv, {**hotel_env(llm), "HOTEL_AGENT_MODEL": model}, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return read_json(results)


def test_a_pinned_failure_fails_the_same_way_and_passes_once_fixed(tmp_path: Path) -> None:
    scenarios = tmp_path / "scenarios.yaml"
    scenarios.write_text(SCENARIOS, encoding="utf-8")
    with LLMServer([*broken_agent_rules(), *HOTEL_RULES]) as llm:
        first = play(tmp_path, llm, scenarios, "hotel-agent-broken", "simulated")
        (simulated,) = first["scenarios"]
        assert simulated["status"] == "failed", simulated
        attempt = simulated["attempts"][0]
        assert attempt["agent_check"].startswith("vetoed"), attempt
        assert sum(i["role"] == "user" for i in attempt["transcript"]) >= 2  # a real call

        pinned = tmp_path / "pinned.yaml"
        proc = run_lkeval(
            ["pin", "--results", str(tmp_path / "simulated.json"), "--scenario", "SCN_simAda",
             "--into", str(pinned)],
            hotel_env(llm),
            cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert run_lkeval(["validate", str(pinned)], hotel_env(llm)).returncode == 0

        again = play(tmp_path, llm, pinned, "hotel-agent-broken", "pinned-broken")
        (broken,) = again["scenarios"]
        assert broken["scenario_id"] == "SCN_simAda-pin1"
        assert broken["status"] == "failed", broken
        replayed = broken["attempts"][0]
        assert replayed["agent_check"] == attempt["agent_check"]  # the same veto, same words
        said = [i["text"] for i in attempt["transcript"] if i["role"] == "user"]
        assert [i["text"] for i in replayed["transcript"] if i["role"] == "user"] == said

        fixed = play(tmp_path, llm, pinned, "hotel-agent", "pinned-fixed")
        (passing,) = fixed["scenarios"]
        assert passing["status"] == "passed", passing
