"""End to end: simulated users and judges played by the local LLM, repeats, quarantine, outages.

The local server plays the agent's LLM, the caller and the judge (told apart by model name);
markers in a scenario's instructions steer the caller and judge rules for that scenario.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import HOTEL, hotel_env, read_json, run_argv, run_lkeval

from lkeval.testing.llm_rules import read_rules_file
from lkeval.testing.llm_server import LLMServer

pytestmark = pytest.mark.e2e

HOTEL_RULES, _ = read_rules_file(HOTEL / "llm_rules.yaml")
AGENT_RULES = [r for r in HOTEL_RULES if r.get("model") == "hotel-agent"]
CALLER_RULES = [r for r in HOTEL_RULES if r.get("model") == "caller"]


def verdict(value: str, reasoning: str = "because") -> dict:
    return {"name": "submit_verdict", "arguments": {"reasoning": reasoning, "verdict": value}}


JUDGE = {"model": "judge", "tool_choice": "submit_verdict"}
SECRET = "test-key-not-secret"  # the OPENAI_API_KEY hotel_env gives the agent
RULES = [
    {"model": "hotel-agent", "last_user": "bye", "text": f"Goodbye! (debug: key {SECRET})"},
    *AGENT_RULES,
    {"model": "caller", "system": "LOOPING", "text": "Tell me more about the rooms."},
    *CALLER_RULES,
    # lk-eval's judge preflight: the known-bad canary (the agent refuses to help) fails
    {**JUDGE, "last_user": "I can't help with that", "tool_calls": [verdict("fail", "no")]},
    {**JUDGE, "last_user": "OUTAGE", "status": 500, "text": "upstream exploded"},
    {
        **JUDGE,
        "last_user": "MALFORMED",
        "tool_calls": [{"name": "submit_verdict", "arguments": "{not json"}],
    },
    {**JUDGE, "last_user": "LOOPING", "tool_calls": [verdict("maybe", "never got anywhere")]},
    {**JUDGE, "last_user": "FLAKY", "times": 1, "tool_calls": [verdict("fail", "bad luck")]},
    {**JUDGE, "last_user": "QUARANTINED", "tool_calls": [verdict("fail", "known bad")]},
    {**JUDGE, "tool_calls": [verdict("pass", "booked as asked")]},
]
INTENT = "tells the guest a double room is free"
BOOKING = "You are Ada. Ask for a double room for two nights and book it. {marker}"


def scenario(sid: str, marker: str, **extra: object) -> dict:
    return {
        "id": sid,
        "label": sid.replace("-", " ").title(),
        "instructions": BOOKING.format(marker=marker),
        "agent_expectations": f"The agent books the room. {marker}",
        **extra,
    }


def llm_env(llm: LLMServer) -> dict[str, str]:
    return hotel_env(llm, LKEVAL_LLM_RETRIES="1")


def test_simulated_users_judges_repeats_and_outages(tmp_path: Path) -> None:
    scenarios = tmp_path / "scenarios.yaml"
    scenarios.write_text(
        yaml.safe_dump(
            {
                "name": "Sim",
                "scenarios": [
                    scenario("ends-call", ""),
                    scenario("never-ends", "LOOPING", max_turns=2),
                    scenario("judge-outage", "OUTAGE"),
                    scenario("judge-malformed", "MALFORMED"),
                    scenario("flaky", "FLAKY", repeat=3, min_pass=2),
                    scenario("quarantined", "QUARANTINED", tags={"flaky": "true"}),
                    scenario(
                        "scripted-then-simulated",
                        "",
                        then_simulate=True,
                        turns=[
                            {
                                "user": "Is a double room free for two nights?",
                                "expect": [{"contains": {"message": {"intent": INTENT}}}],
                            }
                        ],
                    ),
                ],
            },
            sort_keys=False,
        )
    )
    results_path = tmp_path / "results.json"
    with LLMServer(RULES) as llm:
        proc = run_lkeval(
            [
                *run_argv(HOTEL / "agent.py", scenarios, results_path),
                "--caller-model",
                "caller",
                "--judge-model",
                "judge",
                "--quarantine",
                "flaky=true",
                "--concurrency",
                "2",
            ],
            llm_env(llm),
        )
        judge_prompts = [str(r.body) for r in llm.requests if r.body.get("model") == "judge"]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    by_id = {s["scenario_id"]: s for s in read_json(results_path)["scenarios"]}
    assert SECRET not in results_path.read_text() and SECRET not in proc.stdout + proc.stderr
    goodbye = [i["text"] for i in by_id["ends-call"]["attempts"][0]["transcript"]]
    assert "Goodbye! (debug: key ***)" in goodbye  # masked, not dropped

    ends = by_id["ends-call"]
    assert ends["status"] == "passed", ends
    attempt = ends["attempts"][0]
    assert attempt["end_reason"].startswith("the simulated user ended the call")
    assert [v["source"] for v in attempt["verdicts"]] == ["judge", "agent"] or [
        v["source"] for v in attempt["verdicts"]
    ] == ["judge"]
    assert attempt["usage"]["caller"]["input_tokens"] > 0
    assert attempt["usage"]["judge"]["input_tokens"] > 0

    never = by_id["never-ends"]
    assert never["attempts"][0]["end_reason"] == "max turns reached (2)"
    assert never["status"] == "failed" and "maybe" in never["reason"]  # maybe counts as fail

    outage = by_id["judge-outage"]
    assert outage["status"] == "error" and "500" in outage["reason"], outage["reason"]
    malformed = by_id["judge-malformed"]
    assert malformed["status"] == "error", malformed

    flaky = by_id["flaky"]
    assert len(flaky["attempts"]) == 3 and flaky["min_pass"] == 2
    assert sorted(a["status"] for a in flaky["attempts"]) == ["failed", "passed", "passed"]
    assert flaky["status"] == "passed"

    mixed = by_id["scripted-then-simulated"]
    assert mixed["status"] == "passed", mixed
    attempt = mixed["attempts"][0]
    intent_check = attempt["expectations"][0]
    assert intent_check["passed"] and "judged as" in intent_check["description"]
    assert any(INTENT in prompt for prompt in judge_prompts)
    user_turns = [i for i in attempt["transcript"] if i["role"] == "user"]
    assert user_turns[0]["text"] == "Is a double room free for two nights?"
    assert len(user_turns) > 1  # the simulated user carried on
    assert attempt["end_reason"].startswith("the simulated user ended the call")

    quarantined = by_id["quarantined"]
    assert quarantined["quarantined"] is True and quarantined["status"] == "failed"
    gate_line = proc.stdout.strip().splitlines()[-1]
    assert "Quarantined" not in gate_line.split("—")[-1]  # not among the blocking failures


def _comparable(path: Path) -> list[tuple]:
    out = []
    for s in read_json(path)["scenarios"]:
        attempt = s["attempts"][0]
        transcript = [
            (i["turn"], i["kind"], i["role"], i["text"], i["name"], i["arguments"])
            for i in attempt["transcript"]
        ]
        verdicts = [(v["source"], v["verdict"]) for v in attempt["verdicts"]]
        out.append((s["scenario_id"], s["status"], transcript, verdicts))
    return out


def test_results_do_not_depend_on_concurrency(tmp_path: Path) -> None:
    example = yaml.safe_load((HOTEL / "scenarios.yaml").read_text())
    scripted = [s for s in example["scenarios"] if "turns" in s]
    scenarios = tmp_path / "scenarios.yaml"
    scenarios.write_text(yaml.safe_dump({**example, "scenarios": scripted}, sort_keys=False))
    with LLMServer.from_file(HOTEL / "llm_rules.yaml") as llm:
        for n in (1, 4):
            run_lkeval(
                [
                    *run_argv(HOTEL / "agent.py", scenarios, tmp_path / f"c{n}.json"),
                    "--concurrency",
                    str(n),
                ],
                hotel_env(llm),
            )
    one, four = _comparable(tmp_path / "c1.json"), _comparable(tmp_path / "c4.json")
    assert [s[0] for s in one] == ["SCN_checkDouble01", "SCN_bookAda01", "SCN_vetoGrace01"]
    assert one == four


def test_missing_credentials_stop_before_any_agent_boots(tmp_path: Path) -> None:
    from conftest import clean_env

    logs = tmp_path / "logs"
    proc = run_lkeval(
        [
            *run_argv(HOTEL / "agent.py", HOTEL / "scenarios.yaml", tmp_path / "r.json"),
            "--logs-dir",
            str(logs),
        ],
        clean_env(),
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "OPENAI_API_KEY" in proc.stderr or "LIVEKIT_API_KEY" in proc.stderr
    assert not logs.exists() and not (tmp_path / "r.json").exists()  # no agent was started
