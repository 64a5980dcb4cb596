"""A fork's pull request without LLM credentials, run from cassettes: what replayed in full is
evaluated, the rest is "not run: needs a live LLM (no credentials)", and the gate says what
share was evaluated and never passes while one of them could not run."""

from __future__ import annotations

from dataclasses import replace

import pytest
from report_fixtures import FAILED, PASSED, SKIPPED, metadata

from lkeval.errors import ExitCode
from lkeval.reporters import MarkdownReporter, build_report
from lkeval.results.gate import NO_CREDENTIALS_FAILED, evaluate_gate
from lkeval.results.model import NOT_RUN_NO_LLM, Replay, RunResults, ScenarioResult
from lkeval.results.results_json import dump_results, load_results
from lkeval.results.wording import without_credentials

FULL = Replay("replayed", "a.json", calls_replayed=6)
MISS = Replay(
    "missed", "b.json", live_from_call=2, client="agent", reason="messages[1].content differs"
)


def scenario(base: ScenarioResult, sid: str, *records: Replay, **more: object) -> ScenarioResult:
    attempts = tuple(replace(base.attempts[0], replay=r) for r in records)
    return replace(base, scenario_id=sid, label=sid, attempts=attempts, **more)  # type: ignore[arg-type]


def fork_run(*scenarios: ScenarioResult) -> RunResults:
    return without_credentials(RunResults(metadata(), scenarios))


def test_a_scenario_that_needed_a_live_call_is_not_run_with_the_call_it_needed() -> None:
    results = fork_run(
        scenario(PASSED, "same", FULL),
        scenario(FAILED, "changed", FULL, MISS, status="error"),
        scenario(PASSED, "new"),  # no cassette at all: ran live? not without credentials
        SKIPPED,
    )
    by_id = {s.scenario_id: s for s in results.scenarios}
    assert results.metadata.no_credentials
    assert by_id["same"].status == "passed" and by_id["same"].reason == PASSED.reason
    changed = by_id["changed"]
    assert changed.status == "error"
    assert changed.reason == (
        f"{NOT_RUN_NO_LLM}: replay miss at the agent's call 2: messages[1].content differs"
    )
    assert by_id["new"].status == "error" and by_id["new"].reason.startswith(NOT_RUN_NO_LLM)
    assert by_id[SKIPPED.scenario_id].status == "skipped"


@pytest.mark.parametrize("fail_on", ["any", "regression", "never"])
def test_the_gate_never_passes_while_a_changed_scenario_could_not_run(fail_on: str) -> None:
    results = fork_run(
        scenario(PASSED, "a", FULL),
        scenario(PASSED, "b", FULL),
        scenario(PASSED, "c", FULL),
        scenario(PASSED, "changed", MISS, status="error", quarantined=True),
    )
    gate = evaluate_gate(results, None, fail_on)  # type: ignore[arg-type]
    assert not gate.passed and gate.exit_code == ExitCode.GATE_FAILED
    assert gate.reasons[0].startswith(
        f"{NO_CREDENTIALS_FAILED}: 3 of 4 (75.0%) evaluated from cassettes; 1 scenario need"
    )
    assert "changed" in gate.reasons[0] and "pull-requests-from-forks" in gate.reasons[0]


def test_a_fork_run_that_replayed_everything_is_gated_and_says_so() -> None:
    passing = fork_run(scenario(PASSED, "a", FULL), scenario(PASSED, "b", FULL, FULL))
    gate = evaluate_gate(passing, None)
    assert gate.passed and gate.exit_code == ExitCode.PASSED
    assert gate.reasons == (
        "all 2 scenarios passed",
        "no LLM credentials (a fork's pull request): all 2 of 2 (100.0%) evaluated from "
        "cassettes, each replayed in full",
    )
    failing = fork_run(scenario(PASSED, "a", FULL), scenario(FAILED, "b", FULL))
    assert evaluate_gate(failing, None).exit_code == ExitCode.GATE_FAILED  # a replayed failure


def test_nothing_replayed_in_full_is_nothing_evaluated() -> None:
    results = fork_run(scenario(PASSED, "a", MISS, status="error"), scenario(PASSED, "b"))
    gate = evaluate_gate(results, None)
    assert gate.exit_code == ExitCode.NOTHING_RAN
    assert gate.reasons == (
        f"{NO_CREDENTIALS_FAILED}: 0 of 2 (0.0%) evaluated from cassettes; 2 scenarios need a "
        "live LLM and there are no credentials (a fork's pull request): a, b; evaluate it "
        "with credentials (docs/action.md#pull-requests-from-forks)",
    )


def test_the_share_survives_the_results_file_and_reaches_the_comment(tmp_path) -> None:  # type: ignore[no-untyped-def]
    results = fork_run(scenario(PASSED, "a", FULL), scenario(PASSED, "changed", MISS))
    path = tmp_path / "results.json"
    path.write_text(dump_results(results))
    again = load_results(path)
    assert again.metadata.no_credentials
    gate = evaluate_gate(again, None)
    assert not gate.passed
    markdown = MarkdownReporter().format(build_report(again, None, gate))
    assert "1 of 2 (50.0%) evaluated from cassettes" in markdown


def test_lkeval_report_accepts_the_not_run_status_it_recomputes_as_error() -> None:
    from lkeval.results.consistency import status_problem

    results = fork_run(scenario(PASSED, "a", FULL), scenario(PASSED, "changed", FULL, MISS))
    assert status_problem(results) == ""
    forged = replace(
        results, scenarios=(results.scenarios[0], replace(results.scenarios[1], status="passed"))
    )
    assert "recorded passed, but its attempts give error" in status_problem(forged)
