"""A calibrated judge error: bounded, from the baseline only, and never a way to pass a broken
scenario (tests that would fail if calibration could turn a regression into a pass)."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest
from report_fixtures import metadata, scenario

from lkeval.cli.options import ReportOptions
from lkeval.cli.report import report_main
from lkeval.errors import ExitCode
from lkeval.publish.files import write_text
from lkeval.reporters import JUnitReporter, MarkdownReporter, build_report
from lkeval.results.baseline import compare
from lkeval.results.calibration import (
    MAX_JUDGE_ERROR,
    MIN_JUDGE_ERROR,
    WEAK_JUDGE_ALLOWED,
    calibrated_errors,
    cannot_tell,
    judge_error,
    rule_with,
    unfit_passes,
)
from lkeval.results.consistency import status_problem
from lkeval.results.gate import evaluate_gate
from lkeval.results.history import rolled
from lkeval.results.model import (
    Attempt,
    Calibration,
    History,
    RunResults,
    ScenarioHistory,
    SuiteFingerprint,
    Verdict,
)
from lkeval.results.results_json import dump_results
from lkeval.results.sampling import (
    Observation,
    SequentialRule,
    describe,
    observe,
    operating,
    recheck,
)


def cal(false_passes: int, control_votes: int, false_fails: int, good_votes: int) -> Calibration:
    return Calibration(false_passes, control_votes, false_fails, good_votes)


@pytest.mark.parametrize(
    ("calibration", "expected"),
    [
        (cal(0, 40, 0, 40), 0.09),  # Wilson upper bound of 0 of 40 is 0.0876, rounded up
        (cal(0, 200, 0, 200), MIN_JUDGE_ERROR),  # held at the floor
        (cal(4, 40, 0, 40), 0.24),  # 0.1 measured: the bound 0.2366
        (cal(0, 40, 2, 40), 0.17),  # false fails count as much as false passes
        (cal(30, 40, 0, 40), MAX_JUDGE_ERROR),  # cannot tell: held at the ceiling
        (cal(0, 5, 0, 5), MAX_JUDGE_ERROR),  # five votes claim nothing
    ],
)
def test_the_assumed_error_is_the_larger_upper_bound_held_in_range(
    calibration: Calibration, expected: float
) -> None:
    assert judge_error(calibration) == pytest.approx(expected)


def test_a_judge_passing_half_the_broken_controls_cannot_tell() -> None:
    assert cannot_tell(cal(20, 40, 0, 40)) and cannot_tell(cal(0, 40, 4, 8))
    assert not cannot_tell(cal(1, 40, 0, 40))
    assert not cannot_tell(cal(0, 5, 0, 5))  # too few votes: a high assumed error, no more


@pytest.mark.parametrize("error", [MIN_JUDGE_ERROR, 0.1, 0.15, 0.2, MAX_JUDGE_ERROR])
def test_every_calibrated_rule_still_catches_a_90_percent_broken_scenario(error: float) -> None:
    """Exact (operating()): whatever the calibration sets within its bounds, a broken scenario
    judged by a judge with that error is caught in at least 99% of runs."""
    rule = rule_with(SequentialRule(), error)
    assert operating(rule, rule.broken).p_fail >= 0.99


@pytest.mark.parametrize("error", [MIN_JUDGE_ERROR, 0.1, MAX_JUDGE_ERROR, 0.0, 0.9])
def test_a_scenario_the_judge_always_fails_fails_under_any_calibration(error: float) -> None:
    rule = rule_with(SequentialRule(), error)
    seen: list[Observation] = []
    while rule.outcome(seen) == "undecided":
        seen.append(Observation(0, 1))
    assert rule.outcome(seen) == "failed"


def judged_attempt(*votes: str) -> Attempt:
    passed = votes.count("pass") > len(votes) / 2
    verdict = Verdict("judge", "pass" if passed else "fail", "", votes)
    return Attempt(status="passed" if passed else "failed", verdicts=(verdict,))


def recorded(error: float, *attempts: Attempt) -> RunResults:
    """A sequential pass as a run calibrated at ``error`` recorded it."""
    rule = rule_with(SequentialRule(), error)
    obs = [o for a in attempts if (o := observe(a)) is not None]
    sampling = describe(rule, obs)
    s = scenario("book", sampling.outcome, attempts=attempts, sampling=sampling)
    return RunResults(metadata(), (s,))


def test_a_pass_recorded_under_a_forged_low_error_is_failed_by_the_gate() -> None:
    """Pass, pass, fail, pass, pass passes at the floor error, not at the default: a file
    claiming the floor for itself is consistent, but the gate re-decides with the baseline's
    calibration (here: none) and fails it."""
    votes = ("pass", "pass", "fail", "pass", "pass")
    at_floor = recorded(MIN_JUDGE_ERROR, *(judged_attempt(v) for v in votes))
    assert at_floor.scenarios[0].status == "passed"
    assert at_floor.scenarios[0].sampling is not None
    assert at_floor.scenarios[0].sampling.judge_error == MIN_JUDGE_ERROR
    assert status_problem(at_floor) == ""  # consistent with what it says it assumed
    assert recheck(at_floor).scenarios[0].status == "failed"  # the default rule: not enough
    sid = at_floor.scenarios[0].scenario_id
    assert recheck(at_floor, {sid: MIN_JUDGE_ERROR}).scenarios[0].status == "passed"


def test_only_calibrations_of_unchanged_content_are_used() -> None:
    history = History(
        20,
        scenarios={
            "a": ScenarioHistory("d1", calibration=cal(0, 40, 0, 40)),
            "b": ScenarioHistory("d1", calibration=cal(0, 40, 0, 40)),
            "c": ScenarioHistory("d1"),
        },
    )
    assert calibrated_errors(history, {"a": "d1", "b": "d2", "c": "d1"}) == {"a": ("d1", 0.09)}
    assert set(calibrated_errors(history, {})) == {"a", "b"}
    assert calibrated_errors(None, {}) == {}


def test_the_engine_uses_a_calibration_only_for_the_content_it_was_measured_on() -> None:
    from lkeval.run.engine import EngineOptions
    from lkeval.scenarios.model import Scenario

    fields = {f.name for f in dataclasses.fields(Scenario)}
    assert {"id", "label"} <= fields
    s = _a_scenario()
    options = EngineOptions(judge_errors={s.id: (s.digest, 0.2)})
    assert options.rule_for(s).judge_error == 0.2
    edited = EngineOptions(judge_errors={s.id: ("another", 0.2)})
    assert edited.rule_for(s) == SequentialRule()


def _a_scenario():  # type: ignore[no-untyped-def]
    from pathlib import Path

    from lkeval.scenarios.loader import load_or_raise

    here = Path(__file__).parent.parent / "data" / "scenarios" / "valid" / "room_booking.yaml"
    groups, _ = load_or_raise([here])
    return groups[0].scenarios[0]


def with_suite(results: RunResults, digest: str = "d1") -> RunResults:
    suite = SuiteFingerprint(scenarios={s.scenario_id: digest for s in results.scenarios})
    return dataclasses.replace(results, metadata=dataclasses.replace(results.metadata, suite=suite))


def calibrated_baseline(calibration: Calibration, sid: str) -> RunResults:
    """A default-branch run whose scenario ``sid`` carries ``calibration`` (lkeval calibrate)."""
    own = scenario("book", "passed", calibration=calibration)
    assert own.scenario_id == sid
    return with_suite(
        RunResults(metadata(started_at="2025-01-09T00:00:00Z"), (own,)),
    )


def test_rolling_carries_the_calibration_a_baseline_run_measured() -> None:
    base = calibrated_baseline(cal(0, 200, 0, 200), "SCN_book")
    assert rolled(base).scenarios["SCN_book"].calibration == cal(0, 200, 0, 200)
    again = dataclasses.replace(
        with_suite(RunResults(metadata(started_at="2025-01-10T00:00:00Z"), (scenario("book"),))),
        history=rolled(base),
    )
    assert rolled(again).scenarios["SCN_book"].calibration == cal(0, 200, 0, 200)


def test_report_gates_a_calibrated_pass_with_the_baselines_calibration_only(
    tmp_path: Path,
) -> None:
    votes = ("pass", "pass", "fail", "pass", "pass")
    results = with_suite(recorded(MIN_JUDGE_ERROR, *(judged_attempt(v) for v in votes)))
    sid = results.scenarios[0].scenario_id
    path, base_path = tmp_path / "results.json", tmp_path / "base.json"
    write_text(path, dump_results(results))
    write_text(base_path, dump_results(calibrated_baseline(cal(0, 200, 0, 200), sid)))
    out = io.StringIO()
    assert report_main(str(path), ReportOptions(baseline=str(base_path)), out) == 0, out.getvalue()
    out = io.StringIO()  # without the baseline, the file's own claim counts for nothing
    assert report_main(str(path), ReportOptions(), out) == ExitCode.GATE_FAILED
    # a baseline that calibrated other content (the scenario was edited since) counts neither
    write_text(
        base_path, dump_results(with_suite(calibrated_baseline(cal(0, 200, 0, 200), sid), "d2"))
    )
    assert report_main(str(path), ReportOptions(baseline=str(base_path)), io.StringIO()) == 1


def test_reports_say_when_the_judge_cannot_tell() -> None:
    current = with_suite(
        RunResults(metadata(started_at="2025-01-10T00:00:00Z"), (scenario("book"),))
    )
    base = calibrated_baseline(cal(30, 40, 0, 40), "SCN_book")
    comparison = compare(current, base)
    report = build_report(current, comparison, evaluate_gate(current, comparison))
    markdown = MarkdownReporter().format(report)
    assert "The judge cannot tell good from broken (1)" in markdown
    assert "judge passed 30 of 40 broken controls" in markdown
    junit = JUnitReporter().format(report)
    assert 'name="judge_calibration" value="judge passed 30 of 40 broken controls' in junit


def test_a_run_hands_the_baselines_calibrations_to_its_stopping_rule(tmp_path: Path) -> None:
    from lkeval.cli.options import RunOptions
    from lkeval.cli.report import RunWriters

    base_path = tmp_path / "base.json"
    write_text(base_path, dump_results(calibrated_baseline(cal(0, 40, 0, 40), "SCN_book")))
    options = RunOptions(
        agent="agent.py", scenarios=("s.yaml",), report=ReportOptions(baseline=str(base_path))
    )
    found = RunWriters(options.report, io.StringIO()).check_baseline()
    assert found == {"SCN_book": ("d1", cal(0, 40, 0, 40))}
    assert judge_error(found["SCN_book"][1]) == 0.09
    assert RunWriters(ReportOptions(), io.StringIO()).check_baseline() == {}


def test_report_keeps_a_pass_its_baseline_calls_the_judge_unfit_for_from_the_gate(
    tmp_path: Path,
) -> None:
    # three votes each: a pass even at the 0.25 error the calibration sets
    attempts = [judged_attempt("pass", "pass", "pass") for _ in range(3)]
    results = with_suite(recorded(0.25, *attempts))
    sid = results.scenarios[0].scenario_id
    path, base_path = tmp_path / "results.json", tmp_path / "base.json"
    write_text(path, dump_results(results))
    write_text(base_path, dump_results(calibrated_baseline(cal(20, 20, 0, 20), sid)))
    out = io.StringIO()
    code = report_main(str(path), ReportOptions(baseline=str(base_path)), out)
    assert code != ExitCode.PASSED, out.getvalue()  # (exit 3: these attempts hold no turn)
    (unfit,) = unfit_passes(results, rolled(calibrated_baseline(cal(20, 20, 0, 20), sid))).scenarios
    assert unfit.status == "error"
    assert unfit.reason.startswith("judge unfit: the judge passed 20 of 20 known-bad controls")
    # a run that let it pass by --allow-weak-judge says so, and the gate line names it
    allowed = dataclasses.replace(
        results.scenarios[0], reason=f"{WEAK_JUDGE_ALLOWED} the judge passed 20 of 20"
    )
    write_text(path, dump_results(dataclasses.replace(results, scenarios=(allowed,))))
    out = io.StringIO()
    assert report_main(str(path), ReportOptions(baseline=str(base_path)), out) == 0
    assert "passed on a judge measured unfit (--allow-weak-judge)" in out.getvalue()
    # without that baseline the file gates as it is
    assert report_main(str(path), ReportOptions(), io.StringIO()) == 0
