"""End to end, the default sequential test through the real CLI: real agents, a noisy judge on
the local LLM server (seeded), every judge call accounted for in the results."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, clean_env, read_json, run_lkeval

from lkeval.testing.llm_server import LLMServer

pytestmark = pytest.mark.e2e

sys.path.insert(0, str(ROOT / "bench"))
from verdict_trust import AGENT, RULES  # noqa: E402


def test_default_sequential_test_with_a_noisy_judge(tmp_path: Path) -> None:
    scenarios = [
        {
            "id": sid,
            "label": sid,
            "agent_expectations": "The agent offers to help with the booking.",
            "userdata": {"fail_rate": rate},
            "turns": [{"user": "Hello, can you help me with a booking?"}],
        }
        for sid, rate in (("SCN_fine", 0.0), ("SCN_broken", 1.0))
    ]
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"name": "Trust", "scenarios": scenarios}, sort_keys=False))
    results_path = tmp_path / "results.json"
    quirks = {"noisy_verdicts": {"fraction": 0.15, "seed": 3}}
    with LLMServer(RULES, quirks=quirks) as llm:
        env = clean_env(OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="test-key-not-secret")
        argv = ["run", "--agent", str(AGENT), "--scenarios", str(path), "--results"]
        argv += [str(results_path), "--no-github", "--judge-model", "judge", "--concurrency", "2"]
        proc = run_lkeval(argv, env, timeout=600)
        noisy = llm.quirks.noisy_verdicts
        assert noisy is not None
        judge_calls = noisy.seen
    assert proc.returncode == 1, proc.stdout + proc.stderr
    results = read_json(results_path)
    fine, broken = results["scenarios"]
    assert fine["status"] == "passed", fine["reason"]
    assert broken["status"] == "failed"
    for scenario in (fine, broken):
        sampling = scenario["sampling"]
        assert sampling["mode"] == "sequential"
        assert sampling["attempts"] == len(scenario["attempts"]) >= 3
        assert sampling["text"].startswith(f"{sampling['outcome']} {sampling['passes']} of ")
    assert "pass rate below 0.86" in broken["sampling"]["text"]
    assert broken["sampling"]["text"] in proc.stdout  # the progress line shows the decision
    # every judge call is a vote in the results, or went to the preflight: one call that learns
    # the endpoint's verdict form, then each canary's recorded answers
    votes = sum(s["sampling"]["judge_votes"] for s in (fine, broken))
    check = results["metadata"]["judge_check"]
    preflight = 1 + len(check["known_fail_votes"]) + len(check["known_pass_votes"])
    assert check["known_fail"] == "fail" and not check["weak"]
    # and each passing decision's paired known-bad control (lkeval.run.control)
    controls = sum(
        int(n)
        for s in (fine, broken)
        for n in re.findall(r"refused-everything: (\d+) call", s["sampling"]["text"])
    )
    assert fine["status"] != "passed" or controls >= 1
    assert judge_calls == votes + preflight + controls
    assert results["metadata"]["sampling_rule"]["max_attempts"] == 20
