"""Under pytest a scenario passes only where ``lkeval run``'s gate would pass it: a scenario that
checks nothing, a judge that fails its canaries, and a verdict no judge gave are no passes.

None of these plays a conversation: they are decided before any agent is imported.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# Imported once here: pytester's in-process runs restore sys.modules after each run, and numpy
# (which the run flags import) loads only once a process.
import lkeval.pytest_plugin.collect  # noqa: F401
from lkeval.pytest_plugin.simulation import ScenarioVerdict
from lkeval.results.model import Verdict
from lkeval.scenarios.model import Scenario
from lkeval.testing.llm_server import LLMServer

pytest_plugins = ["pytester"]

UNCHECKED = """\
scenarios:
  - id: SCN_unchecked
    label: Says hello
    instructions: Say hello.
    agent_expectations: It greets.
    turns:
      - user: Hello.
"""
ENABLED = ("--lkeval-scenarios", "scenarios.yaml", "--lkeval-agent", "agent.py")


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makefile(".yaml", scenarios=UNCHECKED)
    pytester.makepyfile(agent="raise SystemExit('never imported: decided before it')\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(pytester.path / "cache"))
    return pytester


def test_a_scenario_with_nothing_to_check_fails(project: pytest.Pytester) -> None:
    # Its one turn expects nothing and no judge is named: lkeval run's gate fails it.
    run = project.runpytest(*ENABLED)
    run.assert_outcomes(failed=1)
    run.stdout.fnmatch_lines(["scenario SCN_unchecked * skipped: nothing to check: *"])


def test_allow_nothing_to_check_makes_it_a_skip(project: pytest.Pytester) -> None:
    run = project.runpytest(*ENABLED, "--lkeval-run-args=--allow-nothing-to-check")
    run.assert_outcomes(skipped=1)


def test_a_judge_that_fails_its_canaries_fails_every_scenario(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A judge that passes everything, the known-bad canaries too: nothing it judges can pass.
    weak = {
        "model": "judge",
        "has_tool": "submit_verdict",
        "tool_calls": [
            {"name": "submit_verdict", "arguments": {"reasoning": "fine", "verdict": "pass"}}
        ],
    }
    second = UNCHECKED.replace("SCN_unchecked", "SCN_second").replace("scenarios:\n", "")
    project.makefile(".yaml", scenarios=UNCHECKED + second)
    with LLMServer([weak]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        run = project.runpytest(*ENABLED, "--lkeval-run-args=--judge-model judge")
    run.assert_outcomes(failed=2)
    run.stdout.fnmatch_lines(
        ["lk-eval: judge preflight: the judge * passed the known-bad canary *"] * 2
    )
    # Asked once for the session (its first line, in the first item's output), not per item.
    assert run.stdout.str().count("LLMs: judge judge at 127.0.0.1") == 1
    assert not (Path(project.path) / "cache" / "lkeval" / "judge-preflight").exists() or not any(
        (Path(project.path) / "cache" / "lkeval" / "judge-preflight").iterdir()
    )  # a judge that failed is asked again next time


def _scenario() -> Scenario:
    return Scenario(
        label="X",
        instructions="Book.",
        agent_expectations="It books.",
        file="scenarios.yaml",
        line=1,
        group_id="g",
        group_name="G",
        id="SCN_x",
        id_derived=False,
    )


@pytest.mark.parametrize(
    ("verdicts", "passed"),
    [
        ([], False),
        ([Verdict("agent", "pass")], False),  # the veto can fail a run, never pass one
        ([Verdict("judge", "pass"), Verdict("agent", "pass")], True),
        ([Verdict("judge", "pass"), Verdict("agent", "fail", "wrong guest")], False),
        ([Verdict("judge", "maybe", "unsure")], False),
    ],
)
def test_a_fixture_verdict_passes_only_when_a_judge_passed_it(
    verdicts: list[Verdict], passed: bool
) -> None:
    verdict = ScenarioVerdict(_scenario(), (), verdicts)
    assert verdict.passed is passed
    assert verdict.result.status == ("passed" if passed else "failed")
    if not passed:
        with pytest.raises(pytest.fail.Exception):
            verdict.assert_passed()


def test_the_judge_comes_from_where_lkeval_run_takes_it(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # [tool.lkeval] first, then the ini key, then --lkeval-run-args: the last word wins, as
    # on lkeval run's command line. The preflight's line names the judge that was asked.
    weak = {
        "has_tool": "submit_verdict",
        "tool_calls": [
            {"name": "submit_verdict", "arguments": {"reasoning": "ok", "verdict": "pass"}}
        ],
    }
    project.makefile(".toml", pyproject='[tool.lkeval]\njudge-model = "file-judge"\n')
    with LLMServer([weak]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        from_file = project.runpytest(*ENABLED)
        project.makeini("[pytest]\nlkeval_run_args = --judge-model ini-judge\n")
        from_ini = project.runpytest(*ENABLED)
        from_option = project.runpytest(*ENABLED, "--lkeval-run-args=--judge-model cli-judge")
    for run, judge in (
        (from_file, "file-judge"),
        (from_ini, "ini-judge"),
        (from_option, "cli-judge"),
    ):
        run.assert_outcomes(failed=1)
        run.stdout.fnmatch_lines([f"lk-eval: judge preflight: the judge ({judge} at 127.0.0.1:*"])
