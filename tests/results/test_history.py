"""The pass-rate history: rolled forward deterministically and bounded, keyed by content, and
never able to excuse a scenario that passed nothing (tests that would fail if it could)."""

from __future__ import annotations

import dataclasses
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from report_fixtures import metadata, scenario, verdicts_for

from lkeval.cli import build_parser
from lkeval.cli.options import ReportOptions, RunOptions
from lkeval.cli.report import RunWriters, report_main
from lkeval.errors import ExitCode
from lkeval.publish.files import write_text
from lkeval.reporters import JUnitReporter, MarkdownReporter, build_report
from lkeval.results.baseline import compare
from lkeval.results.gate import evaluate_gate
from lkeval.results.history import MIN_ATTEMPTS, rate_of, rolled, with_history
from lkeval.results.model import (
    Attempt,
    History,
    HistoryRun,
    RunCount,
    RunResults,
    ScenarioHistory,
    ScenarioResult,
    SuiteFingerprint,
)
from lkeval.results.results_json import dump_results, load_results

SID = "SCN_book"


def attempts(passes: int, fails: int, error: int = 0) -> tuple[Attempt, ...]:
    return (
        (Attempt(status="passed", verdicts=verdicts_for("passed")),) * passes
        + (Attempt(status="failed", verdicts=verdicts_for("failed")),) * fails
        + (Attempt(status="error"),) * error
    )


def result(passes: int, fails: int, status: str | None = None, error: int = 0) -> ScenarioResult:
    decided = status or ("passed" if passes > fails else "failed")
    return scenario("book", decided, attempts=attempts(passes, fails, error))


def run(*scenarios: ScenarioResult, started: str, digest: str = "d1", **meta: object) -> RunResults:
    fingerprint = SuiteFingerprint(scenarios={s.scenario_id: digest for s in scenarios})
    return RunResults(
        metadata=metadata(started_at=started, suite=fingerprint, **meta),
        scenarios=tuple(scenarios),
    )


def history_of(passes: int, attempts_: int, runs: int = 5, digest: str = "d1") -> History:
    """``runs`` earlier runs holding ``passes`` of ``attempts_`` in all (spread evenly)."""
    counts = []
    for i in range(runs):
        p = passes // runs + (1 if i < passes % runs else 0)
        a = attempts_ // runs + (1 if i < attempts_ % runs else 0)
        counts.append(RunCount(f"2025-01-0{i + 1}T00:00:00Z", p, a, "passed"))
    return History(
        20,
        tuple(HistoryRun(c.run, f"sha{i}") for i, c in enumerate(counts)),
        {SID: ScenarioHistory(digest, tuple(counts))},
    )


def baseline_with(history: History, now: ScenarioResult | None = None) -> RunResults:
    """A baseline whose own run is counted into ``history`` (a flaky pass by default)."""
    own = now or result(2, 1)
    return dataclasses.replace(run(own, started="2025-01-09T00:00:00Z"), history=history)


def gate(current: RunResults, baseline: RunResults) -> tuple[bool, str]:
    comparison = compare(current, baseline)
    outcome = evaluate_gate(current, comparison, "regression")
    return outcome.passed, "; ".join(outcome.reasons)


# --- rolling ------------------------------------------------------------------------------


def test_rolling_adds_the_baselines_own_run_once_and_keeps_the_window() -> None:
    base = baseline_with(history_of(14, 20, runs=5), result(2, 1))
    history = rolled(base, window=4)
    assert [r.started_at for r in history.runs][-1] == "2025-01-09T00:00:00Z"
    assert len(history.runs) == 4  # the oldest two fell out of the window
    counts = history.scenarios[SID].counts
    assert len(counts) == 4 and counts[-1] == RunCount("2025-01-09T00:00:00Z", 2, 3, "passed")
    again = dataclasses.replace(base, history=rolled(base, window=4))
    assert rolled(again, window=4) == rolled(again, window=4)  # deterministic
    assert rolled(again, window=4).scenarios[SID].counts == counts  # not counted twice


def test_an_edited_scenario_starts_a_fresh_history() -> None:
    base = baseline_with(history_of(14, 20), result(2, 1))
    edited = dataclasses.replace(
        base,
        metadata=dataclasses.replace(base.metadata, suite=SuiteFingerprint(scenarios={SID: "d2"})),
    )
    assert rolled(edited).scenarios[SID].counts == (
        RunCount("2025-01-09T00:00:00Z", 2, 3, "passed"),
    )
    # and a run of the edited scenario does not read the old content's history
    current = run(result(0, 3), started="2025-01-10T00:00:00Z", digest="d2")
    change = compare(current, base).change_for(SID)
    assert change is not None and change.history is None
    assert with_history(current, base, 20).history == History(20, rolled(base).runs, {})


def test_only_attempts_with_a_verdict_count_on_main() -> None:
    base = baseline_with(History(20), result(3, 0, error=2))
    assert rolled(base).scenarios[SID].counts[0].attempts == 3


def test_too_little_history_says_nothing() -> None:
    assert rate_of(history_of(MIN_ATTEMPTS - 2, MIN_ATTEMPTS - 1).scenarios[SID]) is None
    assert rate_of(history_of(MIN_ATTEMPTS, MIN_ATTEMPTS).scenarios[SID]) is not None


# --- what the history decides ---------------------------------------------------------------


def test_a_flaky_scenario_at_2_of_3_is_not_a_regression_and_is_listed_known_flaky() -> None:
    base = baseline_with(history_of(14, 20))  # 70% on main
    current = run(result(2, 1, status="failed"), started="2025-01-10T00:00:00Z")
    passed, why = gate(current, base)
    change = compare(current, base).change_for(SID)
    assert change is not None and change.history is not None
    assert change.history.state == "flaky" and change.kind == "unchanged"
    assert change.history_verdict is not None and change.history_verdict.judgement == "noise"
    assert "Fisher's exact" in change.history_verdict.text
    assert passed, why
    assert [c.scenario_id for c in compare(current, base).known_flaky] == [SID]


def test_a_fall_from_95_to_40_percent_is_a_regression() -> None:
    base = baseline_with(history_of(57, 60, runs=20))  # 95%: stable
    current = run(result(2, 3), started="2025-01-10T00:00:00Z")
    passed, why = gate(current, base)
    assert not passed and "regressed" in why
    # the same fall against a flaky history is tested by Fisher's exact test, and still caught
    flaky = baseline_with(history_of(14, 20))  # 16 of 23 with the baseline's own run
    current = run(result(1, 5), started="2025-01-10T00:00:00Z")
    change = compare(current, flaky).change_for(SID)
    assert change is not None and change.history_verdict is not None
    assert change.history_verdict.judgement == "regression"
    assert change.history_verdict.p_value is not None and change.history_verdict.p_value < 0.05


@pytest.mark.parametrize("rate", [(14, 20), (10, 20), (4, 20), (1, 20), (30, 100)])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 20])
@pytest.mark.parametrize("baseline_status", ["passed", "failed"])
def test_a_scenario_that_passed_no_attempt_is_never_excused_by_history(
    rate: tuple[int, int], n: int, baseline_status: str
) -> None:
    """However flaky main says it is, a run in which nothing passed is a regression whenever
    it would be one without history (the baseline passed), and whenever Fisher's test can
    tell; history only ever excuses a failure that passed some attempts."""
    own = result(2, 1) if baseline_status == "passed" else result(0, 3)
    base = baseline_with(history_of(*rate), own)
    current = run(result(0, n), started="2025-01-10T00:00:00Z")
    change = compare(current, base).change_for(SID)
    assert change is not None
    verdict = change.history_verdict
    assert verdict is None or verdict.judgement != "noise"
    if baseline_status == "passed":
        assert change.kind == "regression"
        passed, _ = gate(current, base)
        assert not passed


def test_a_broken_agent_fails_the_default_gate_whatever_history_says() -> None:
    base = baseline_with(history_of(14, 20))
    current = run(result(2, 1, status="failed"), started="2025-01-10T00:00:00Z")
    outcome = evaluate_gate(current, compare(current, base), "any")
    assert not outcome.passed and outcome.exit_code == ExitCode.GATE_FAILED


def test_a_stable_scenario_that_fails_now_is_a_regression_even_if_the_baseline_run_failed() -> None:
    base = baseline_with(history_of(60, 60, runs=20), result(0, 3))  # main's one bad run
    current = run(result(1, 4), started="2025-01-10T00:00:00Z")
    change = compare(current, base).change_for(SID)
    assert change is not None and change.kind == "regression"
    assert change.history_verdict is not None and "stable" in change.history_verdict.text


def test_an_error_now_counts_as_a_failed_attempt() -> None:
    base = baseline_with(history_of(14, 20))
    current = run(result(1, 0, status="error", error=5), started="2025-01-10T00:00:00Z")
    change = compare(current, base).change_for(SID)
    assert change is not None and change.history_verdict is not None
    assert change.history_verdict.judgement == "regression"  # 1 of 6 against 70%


def test_a_new_scenario_is_not_excused_by_a_history_it_does_not_have() -> None:
    """A scenario the baseline never had has no history, however flaky its attempts look:
    under --fail-on regression it blocks unless its own sampling passed it."""
    base = baseline_with(history_of(14, 20))  # SID is flaky on main; "fresh" is not there
    for fresh in (
        scenario("fresh", "failed", attempts=attempts(2, 1)),
        scenario("fresh", "error", attempts=attempts(1, 0, error=2)),
    ):
        current = run(result(3, 0), fresh, started="2025-01-10T00:00:00Z")
        change = compare(current, base).change_for(fresh.scenario_id)
        assert change is not None and change.kind == "new" and change.history is None
        passed, why = gate(current, base)
        assert not passed and why == "1 new scenario failed or errored: fresh", why
    sampled = scenario("fresh", "passed", attempts=attempts(2, 1))  # the sampling passed it
    assert gate(run(result(3, 0), sampled, started="2025-01-10T00:00:00Z"), base)[0]


def _baseline_without_its_own_result(skipped: bool) -> RunResults:
    """A baseline whose suite holds SID with a 70% history but whose own run did not judge
    it: skipped there (not selected), or not in its results at all (one shard of the suite)."""
    other = scenario("other")
    held = (scenario("book", "skipped", reason="not selected", attempts=()),) if skipped else ()
    base = run(other, *held, started="2025-01-09T00:00:00Z")
    suite = SuiteFingerprint(scenarios={SID: "d1", other.scenario_id: "d1"})
    return dataclasses.replace(
        base,
        metadata=dataclasses.replace(base.metadata, suite=suite),
        history=history_of(14, 20),
    )


@pytest.mark.parametrize("skipped", [True, False], ids=["skipped-there", "not-in-its-results"])
def test_history_noise_still_excuses_a_scenario_with_no_verdict_in_the_baseline(
    skipped: bool,
) -> None:
    """Main's history is main showing the scenario failing: within its noise a failure does
    not block even though the baseline run itself has no verdict on it. A failure the history
    cannot excuse (nothing passed now) blocks."""
    base = _baseline_without_its_own_result(skipped)
    current = run(result(2, 1, status="failed"), scenario("other"), started="2025-01-10T00:00:00Z")
    change = compare(current, base).change_for(SID)
    assert change is not None and change.baseline == ("skipped" if skipped else None)
    assert change.history_verdict is not None and change.history_verdict.judgement == "noise"
    passed, why = gate(current, base)
    assert passed, why
    unknown = (
        "1 scenario failed or errored with no verdict in the baseline: book (skipped there)"
        if skipped
        else "1 new scenario failed or errored: book"
    )
    for attempts_now, reason in (
        ((0, 3), "1 scenario regressed vs the baseline: book"),  # significant
        ((0, 1), unknown),  # too few to tell: the baseline decides, and it has no verdict
    ):
        broken = run(result(*attempts_now), scenario("other"), started="2025-01-10T00:00:00Z")
        assert gate(broken, base) == (False, reason)


# --- in the reports and the files ------------------------------------------------------------


def flaky_comparison() -> tuple[RunResults, RunResults]:
    base = baseline_with(history_of(14, 20))
    current = run(result(2, 1, status="failed"), started="2025-01-10T00:00:00Z")
    return current, base


def test_reports_show_the_rate_on_main_and_list_known_flaky(tmp_path: Path) -> None:
    current, base = flaky_comparison()
    comparison = compare(current, base)
    report = build_report(current, comparison, evaluate_gate(current, comparison, "regression"))
    markdown = MarkdownReporter().format(report)
    assert "Known flaky on main (1, last 6 runs)" in markdown
    assert "70% on main (16 of 23 attempts over 6 runs, flaky)" in markdown
    assert "within main's noise (known flaky)" in markdown
    assert "main 70% (flaky)" in markdown
    junit = ET.fromstring(JUnitReporter().format(report).split("\n", 1)[1])
    props = {p.get("name"): p.get("value") for p in junit.iter("property")}
    assert props["history_rate"] == f"{16 / 23:.4f}"
    assert "Fisher's exact" in (props["history_test"] or "")


def test_results_json_carries_the_history_and_each_rate(tmp_path: Path) -> None:
    current, base = flaky_comparison()
    path = tmp_path / "results.json"
    write_text(path, dump_results(with_history(current, base, 20)))
    data = json.loads(path.read_text())
    assert data["history"]["scenarios"][SID]["digest"] == "d1"
    assert data["scenarios"][0]["history_rate"]["state"] == "flaky"
    assert data["scenarios"][0]["history_rate"]["attempts"] == 23
    assert load_results(path).history == with_history(current, base, 20).history


def test_report_judges_with_the_baselines_history_not_the_results_own(tmp_path: Path) -> None:
    """A pull request's results file claiming a flaky history must not excuse its failure."""
    failing = dataclasses.replace(result(1, 2), min_pass=2)  # --repeat 3 --min-pass 2
    forged = dataclasses.replace(
        run(failing, started="2025-01-10T00:00:00Z"), history=history_of(3, 20, runs=10)
    )
    base = baseline_with(History(20), result(3, 0))
    results, baseline = tmp_path / "results.json", tmp_path / "base.json"
    write_text(results, dump_results(forged))
    write_text(baseline, dump_results(base))
    out = io.StringIO()
    code = report_main(
        str(results),
        ReportOptions(baseline=str(baseline), fail_on="regression"),
        out,
    )
    assert code == ExitCode.GATE_FAILED, out.getvalue()
    assert "regressed" in out.getvalue()


def test_the_history_runs_flag_is_bounded() -> None:
    parser = build_parser()
    args = parser.parse_args(["report", "--results", "r.json", "--history-runs", "5"])
    assert args.history_runs == 5
    with pytest.raises(SystemExit):
        parser.parse_args(["report", "--results", "r.json", "--history-runs", "101"])


def test_a_run_writes_the_history_it_was_compared_with(tmp_path: Path) -> None:
    current, base = flaky_comparison()
    baseline = tmp_path / "base.json"
    write_text(baseline, dump_results(base))
    options = RunOptions(
        agent="agent.py", scenarios=("s.yaml",), report=ReportOptions(baseline=str(baseline))
    )
    path = tmp_path / "results.json"
    RunWriters(options.report, io.StringIO()).write_results(path, current)
    assert load_results(path).history == rolled(base)
    baseline.unlink()  # gone since it was checked: the results are still written, without it
    RunWriters(options.report, io.StringIO()).write_results(path, current)
    assert load_results(path).history is None


def test_a_replayed_attempt_is_not_a_new_sample_only_live_ones_count() -> None:
    from lkeval.results.model import Replay

    replayed = Attempt(status="passed", replay=Replay("replayed", "a.json", calls_replayed=5))
    partial = Replay("partial", "b.json", live_from_call=2, client="agent", calls_live=3)
    live = Attempt(status="failed", replay=partial)
    recorded = Attempt(status="passed", replay=Replay("recorded", "c.json", calls_live=5))
    own = scenario("book", "passed", attempts=(replayed, replayed, live, recorded))
    counts = rolled(baseline_with(History(20), own)).scenarios[SID].counts
    assert counts == (RunCount("2025-01-09T00:00:00Z", 1, 2, "passed"),)
    # a scenario that replayed in full adds a run with no sample at all
    same = scenario("book", "passed", attempts=(replayed,) * 3)
    counts = rolled(baseline_with(History(20), same)).scenarios[SID].counts
    assert counts == (RunCount("2025-01-09T00:00:00Z", 0, 0, "passed"),)


def test_a_slipped_pass_is_corrected_for_the_number_of_scenarios_compared() -> None:
    """Issue 33.7: Fisher's one-sided p of 3 of 6 now against 19 of 20 on main is about 0.03:
    significant alone, not among five scenarios compared (Holm: the smallest p must be below
    0.05 / 5)."""
    from lkeval.results.history import HistoryRate, slipped_passes
    from lkeval.results.pass_rates import fisher_less

    p = fisher_less(3, 6, 19, 20)
    assert 0.01 < p < 0.05
    rate = HistoryRate(19, 20, 4, 0.75, 0.99, "stable")
    slipping = scenario("books", attempts=(Attempt("passed"),) * 3 + (Attempt("failed"),) * 3)
    steady = scenario("greets", attempts=(Attempt("passed"),) * 6)
    alone = slipped_passes({"books": (slipping, rate)})
    assert alone["books"].judgement == "regression" and alone["books"].p_value == p
    among = {"books": (slipping, rate), **{f"s{i}": (steady, rate) for i in range(4)}}
    assert slipped_passes(among) == {}
