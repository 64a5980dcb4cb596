"""End to end, through the real CLI with real agents: a pass the judge gave counts only when the
judge can vouch for it.

- The judge is measured on every run: a judge that passes everything except the preflight's
  canary (so the preflight says it tells good from bad) passes the scenario's own known-bad
  control too, and the scenario is an ``error``; a judge that fails the control passes it, and
  says what the check cost.
- A calibration in the baseline's history (``lkeval calibrate``) that says the judge cannot
  tell makes its passes an ``error`` naming the counts, unless ``--allow-weak-judge``, which the
  gate line then names.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, clean_env, read_json, run_lkeval

from lkeval.testing.llm_server import LLMServer

pytestmark = pytest.mark.e2e

sys.path.insert(0, str(ROOT / "bench"))
from verdict_trust import AGENT, RULES  # noqa: E402

AGENT_RULES = [r for r in RULES if r["model"] == "bench-agent"]


def _verdict(value: str) -> dict[str, Any]:
    return {"name": "submit_verdict", "arguments": {"verdict": value, "reasoning": value}}


JUDGE = {"model": "judge", "has_tool": "submit_verdict"}
# Fails only the preflight's known-bad canaries ("I can't help with that. ..."): the preflight
# says this judge tells them apart, and it passes everything else.
BLIND = [{**JUDGE, "last_user": r"can't help with that\. ", "tool_calls": [_verdict("fail")]}]
# Fails every conversation in which the agent refused (the canary and the paired control).
SEEING = [{**JUDGE, "last_user": "can't help with that", "tool_calls": [_verdict("fail")]}]
PASS = [{**JUDGE, "tool_calls": [_verdict("pass")]}]


def _scenarios(tmp_path: Path) -> Path:
    path = tmp_path / "scenarios.yaml"
    scenario = {
        "id": "SCN_help",
        "label": "Helps the caller",
        "agent_expectations": "The agent offers to help with the booking.",
        "turns": [{"user": "Hello, can you help me with a booking?"}],
    }
    path.write_text(yaml.safe_dump({"name": "Fitness", "scenarios": [scenario]}, sort_keys=False))
    return path


def _run(
    tmp_path: Path, name: str, judge: list[dict[str, Any]], *extra: str
) -> tuple[int, str, dict]:
    results = tmp_path / name
    argv = ["run", "--agent", str(AGENT), "--scenarios", str(_scenarios(tmp_path))]
    argv += ["--results", str(results), "--no-github", "--judge-model", "judge", *extra]
    with LLMServer([*AGENT_RULES, *judge, *PASS]) as llm:
        env = clean_env(OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="test-key-not-secret")
        proc = run_lkeval(argv, env, timeout=600)
    return proc.returncode, proc.stdout + proc.stderr, read_json(results)


def test_a_judge_that_also_passes_the_known_bad_version_has_said_nothing(tmp_path: Path) -> None:
    code, out, results = _run(tmp_path, "blind.json", BLIND)
    assert "the judge tells them apart" in out  # the preflight was satisfied ...
    (scenario,) = results["scenarios"]
    assert code == 1, out  # ... and the gate is not green
    assert scenario["status"] == "error"
    assert scenario["reason"].startswith("judge unfit: the judge also passed a known-bad version")
    assert "refused-everything: 4 calls, every one a pass" in scenario["reason"]
    # a judge that tells them apart passes, at one more call
    code, out, results = _run(tmp_path, "seeing.json", SEEING)
    (scenario,) = results["scenarios"]
    assert code == 0, out
    assert scenario["status"] == "passed"
    text = scenario["sampling"]["text"]
    assert "the judge failed a known-bad version of this conversation" in text
    assert re.search(r"refused-everything: 1 call\)", text), text


def test_a_calibration_that_says_the_judge_cannot_tell_fails_the_gate(tmp_path: Path) -> None:
    code, out, _ = _run(tmp_path, "main.json", SEEING)
    assert code == 0, out
    # calibrate with a judge that passes every control: it cannot tell
    with LLMServer(PASS) as llm:
        env = clean_env(OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="test-key-not-secret")
        argv = ["calibrate", "--results", str(tmp_path / "main.json")]
        argv += ["--scenarios", str(tmp_path / "scenarios.yaml"), "--judge-model", "judge"]
        proc = run_lkeval([*argv, "--votes", "5"], env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cannot tell" in proc.stdout
    baseline = ("--baseline", str(tmp_path / "main.json"))
    code, out, results = _run(tmp_path, "pr.json", SEEING, *baseline)
    (scenario,) = results["scenarios"]
    assert code == 1, out
    assert scenario["status"] == "error"
    assert scenario["reason"].startswith(
        "judge unfit: the judge passed 10 of 10 known-bad controls of this scenario"
    ), scenario["reason"]
    # the user's choice, named on the gate line
    code, out, results = _run(tmp_path, "weak.json", SEEING, *baseline, "--allow-weak-judge")
    (scenario,) = results["scenarios"]
    assert code == 0, out
    assert scenario["status"] == "passed"
    gate = next(line for line in out.splitlines() if line.startswith("lk-eval gate:"))
    assert "passed on a judge measured unfit (--allow-weak-judge): Helps the caller" in gate


def test_with_a_calibration_in_force_the_preflight_asks_about_the_suites_own_conversations(
    tmp_path: Path,
) -> None:
    """BLIND fails only the built-in canaries: alone they let it through. With main's
    calibration in force, known-bad versions of main's own passing conversations take places in
    each round of the preflight, BLIND passes them, and the run stops before any agent boots."""
    code, out, _ = _run(tmp_path, "main.json", SEEING)
    assert code == 0, out
    with LLMServer(PASS) as llm:
        env = clean_env(OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="test-key-not-secret")
        argv = ["calibrate", "--results", str(tmp_path / "main.json")]
        argv += ["--scenarios", str(tmp_path / "scenarios.yaml"), "--judge-model", "judge"]
        assert run_lkeval([*argv, "--votes", "5"], env).returncode == 0
    results = tmp_path / "pr.json"
    argv = ["run", "--agent", str(AGENT), "--scenarios", str(tmp_path / "scenarios.yaml")]
    argv += ["--results", str(results), "--no-github", "--judge-model", "judge"]
    argv += ["--baseline", str(tmp_path / "main.json")]
    with LLMServer([*AGENT_RULES, *BLIND, *PASS]) as llm:
        env = clean_env(OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="test-key-not-secret")
        proc = run_lkeval(argv, env, timeout=600)
        asked_agent = [r for r in llm.requests if r.body.get("model") == "bench-agent"]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "passed the known-bad canary transcripts" in proc.stdout + proc.stderr
    assert asked_agent == []  # stopped before any agent booted
