"""``lkeval calibrate`` through the real CLI against the test LLM server (real HTTP on
127.0.0.1): a judge that tells the booking from its controls, and one that cannot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from conftest import clean_env, run_lkeval
from report_fixtures import BOOKING_TRANSCRIPT, metadata, write_results

from lkeval.results.model import Attempt, RunResults, ScenarioResult, SuiteFingerprint, Verdict
from lkeval.results.results_json import load_results
from lkeval.scenarios.loader import load_or_raise
from lkeval.testing.llm_server import LLMServer

SCENARIO = {
    "name": "Booking",
    "scenarios": [
        {
            "id": "SCN_book",
            "label": "Books two nights from March 3",
            "agent_expectations": "The agent books the room from 2025-03-03 and confirms it.",
            "turns": [{"user": "I'd like a room for two nights from March 3."}],
        }
    ],
}


def verdict(value: str, **match: Any) -> dict[str, Any]:
    return {
        "model": "judge",
        **match,
        "tool_calls": [
            {"name": "submit_verdict", "arguments": {"reasoning": "r", "verdict": value}}
        ],
    }


#: Passes only the real booking: the call with the asked date, and the confirmation said.
TELLS = [
    verdict(
        "pass",
        last_user=r'(?s)"agent_called": "book_room", "arguments": \{"check_in": "2025-03-03"'
        r'.*"from": "agent", "says": "Booked!',
    ),
    verdict("fail"),
]


def setup(tmp_path: Path) -> tuple[Path, Path]:
    scenarios = tmp_path / "scenarios.yaml"
    scenarios.write_text(yaml.safe_dump(SCENARIO, sort_keys=False))
    groups, _ = load_or_raise([scenarios])
    scenario = groups[0].scenarios[0]
    attempt = Attempt(
        status="passed", transcript=BOOKING_TRANSCRIPT, verdicts=(Verdict("judge", "pass"),)
    )
    result = ScenarioResult.of(scenario, "passed", "", attempts=(attempt,))
    suite = SuiteFingerprint(scenarios={scenario.id: scenario.digest})
    path = tmp_path / "results.json"
    write_results(RunResults(metadata(suite=suite), (result,)), path)
    return scenarios, path


def calibrate(tmp_path: Path, rules: list[dict[str, Any]], *more: str) -> tuple[Any, Path]:
    scenarios, results = setup(tmp_path)
    with LLMServer(rules) as llm:
        proc = run_lkeval(
            [
                *("calibrate", "--results", str(results), "--scenarios", str(scenarios)),
                *("--judge-model", "judge", "--judge-base-url", llm.base_url, "--votes", "2"),
                *more,
            ],
            clean_env(OPENAI_API_KEY="not-a-key"),
            timeout=120,
        )
    return proc, results


def test_a_judge_that_tells_the_booking_from_its_controls(tmp_path: Path) -> None:
    proc, path = calibrate(tmp_path, TELLS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calibration = load_results(path).scenarios[0].calibration
    assert calibration is not None
    assert (calibration.false_passes, calibration.control_votes) == (0, 8)
    assert (calibration.false_fails, calibration.good_votes) == (0, 8)
    assert calibration.controls == (
        "drop-tool-call",
        "changed-values",
        "no-confirmation",
        "refusal",
    )
    assert "judge passed 0 of 8 broken controls, failed 0 of 8 good" in proc.stdout
    assert "cannot tell" not in proc.stdout


def test_a_judge_that_passes_everything_cannot_tell(tmp_path: Path) -> None:
    out = tmp_path / "calibrated.json"
    proc, path = calibrate(tmp_path, [verdict("pass")], "--output", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert load_results(path).scenarios[0].calibration is None  # --output: the input stays
    calibration = load_results(out).scenarios[0].calibration
    assert calibration is not None and calibration.false_passes == 8
    assert "cannot tell this scenario's good conversations from broken ones" in proc.stdout
    assert json.loads(out.read_text())["scenarios"][0]["calibration"]["control_votes"] == 8


def test_an_edited_scenario_is_not_calibrated(tmp_path: Path) -> None:
    scenarios, results = setup(tmp_path)
    edited = dict(SCENARIO)
    edited["scenarios"] = [{**SCENARIO["scenarios"][0], "agent_expectations": "Something else."}]
    scenarios.write_text(yaml.safe_dump(edited, sort_keys=False))
    with LLMServer(TELLS) as llm:
        proc = run_lkeval(
            [
                *("calibrate", "--results", str(results), "--scenarios", str(scenarios)),
                *("--judge-model", "judge", "--judge-base-url", llm.base_url),
            ],
            clean_env(OPENAI_API_KEY="not-a-key"),
            timeout=120,
        )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "changed since the run" in proc.stdout
    assert "nothing to calibrate" in proc.stderr
