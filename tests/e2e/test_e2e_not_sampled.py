"""End to end, through the real CLI with the default sequential test: an agent that fails at
boot the same way every time (an import that fails, an entrypoint that raises) ends its
scenario as an ``error`` after one attempt, not three worded as a sampled pass rate."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import TEST_AGENTS, clean_env, read_json, run_lkeval

from lkeval.testing.llm_server import LLMServer

pytestmark = pytest.mark.e2e


def _argv(agent: Path, scenarios: list[dict], tmp_path: Path) -> tuple[list[str], Path]:
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"name": "Boot", "scenarios": scenarios}, sort_keys=False))
    results = tmp_path / "results.json"
    argv = ["run", "--agent", str(agent), "--scenarios", str(path), "--results", str(results)]
    return [*argv, "--no-github", "--concurrency", "1", "--boot-timeout", "90"], results


def _assert_not_sampled(scenario: dict, cause: str, stdout: str) -> None:
    assert scenario["status"] == "error"
    assert cause in scenario["reason"] and "not sampled as noise" in scenario["reason"]
    assert len(scenario["attempts"]) == 1, [a["reason"] for a in scenario["attempts"]]
    sampling = scenario["sampling"]
    assert sampling["attempts"] == 1 and "pass rate" not in sampling["text"]
    assert "stopped after 1 attempt(s)" in sampling["text"] and "99." not in stdout


def test_an_entrypoint_that_raises_is_one_error_and_the_others_are_sampled(
    tmp_path: Path,
) -> None:
    scenarios = [
        {
            "id": "raises",
            "label": "Entrypoint raises",
            "userdata": {"fault": "raise_in_entrypoint"},
            "turns": [{"user": "hello", "expect": [{"message": {}}]}],
        },
        {"id": "fine", "label": "Fine", "turns": [{"user": "hi", "expect": [{"message": {}}]}]},
    ]
    argv, results_path = _argv(TEST_AGENTS / "faulty_agent.py", scenarios, tmp_path)
    with LLMServer([{"model": "faulty-agent", "text": "Fine."}]) as llm:
        proc = run_lkeval(argv, clean_env(OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="k"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    raises, fine = read_json(results_path)["scenarios"]
    assert "entrypoint raised" in raises["reason"]
    assert "not sampled as noise" in proc.stdout  # on its progress line
    assert fine["status"] == "passed" and len(fine["attempts"]) == 3  # sampled as before
    assert "sampling: 4 attempts for 2 scenarios (2 more than one each)" in proc.stdout


def test_a_module_that_cannot_be_imported_is_one_error_per_scenario(tmp_path: Path) -> None:
    scenarios = [
        {"label": f"S{n}", "turns": [{"user": "hi", "expect": [{"message": {}}]}]} for n in (1, 2)
    ]
    argv, results_path = _argv(TEST_AGENTS / "import_error_agent.py", scenarios, tmp_path)
    proc = run_lkeval(argv, clean_env())
    assert proc.returncode == 3, proc.stdout + proc.stderr
    for scenario in read_json(results_path)["scenarios"]:
        _assert_not_sampled(scenario, "ModuleNotFoundError", proc.stdout)
    # the summary never counts less than one attempt a scenario
    assert "sampling: 2 attempts for 2 scenarios (0 more than one each)" in proc.stdout
