"""Baseline comparison and the merge gate's decisions and exit codes."""

from __future__ import annotations

import dataclasses

import pytest
from report_fixtures import baseline_results, results_of, run_results, scenario

from lkeval.errors import ExitCode
from lkeval.results.baseline import compare
from lkeval.results.gate import GateOutcome, evaluate_gate, tally
from lkeval.results.model import (
    NOT_RUN_INTERRUPTED,
    NOT_RUN_NO_LLM,
    Attempt,
    RunResults,
    ScenarioResult,
    TranscriptItem,
)
from lkeval.scenarios.model import NOTHING_TO_CHECK

EXIT_PASSED, EXIT_FAILED = ExitCode.PASSED, ExitCode.GATE_FAILED
EXIT_NOTHING_RAN = ExitCode.NOTHING_RAN


def regression_gate(now: RunResults, before: RunResults) -> GateOutcome:
    """``--fail-on regression`` of ``now`` against the baseline ``before``."""
    return evaluate_gate(now, compare(now, before), "regression")


def test_compare_classifies_every_scenario() -> None:
    c = compare(run_results(), baseline_results())
    assert [x.label for x in c.regressions] == ["Cancel a booking"]
    assert [x.label for x in c.fixed] == ["Handoff to concierge"]
    assert [x.label for x in c.new] == ["Late check-out"]
    assert [x.label for x in c.removed] == ["Parking question"]
    assert {x.label for x in c.unchanged} == {
        "Simple room booking",
        "Suite booking (repeated)",
        "Greets by name",
        "Spa appointment",
    }
    assert c.baseline_sha == "fedcba9876543210fedcba9876543210fedcba98"
    removed = c.change_for("SCN_parking")
    assert removed is not None and removed.current is None and removed.baseline == "passed"


def test_error_after_pass_is_a_regression_and_skip_is_not() -> None:
    before = results_of(scenario("a"), scenario("b"), scenario("c", "failed"))
    now = results_of(scenario("a", "error"), scenario("b", "skipped"), scenario("c", "error"))
    kinds = {x.label: x.kind for x in compare(now, before).changes}
    assert kinds == {"a": "regression", "b": "unchanged", "c": "unchanged"}


def test_tally_counts_quarantined_apart() -> None:
    t = tally(run_results())
    assert (t.passed, t.failed, t.errored, t.skipped, t.quarantined) == (2, 2, 1, 1, 1)
    assert t.pass_rate == pytest.approx(2 / 5)


def test_gate_any_fails_on_failure() -> None:
    gate = evaluate_gate(run_results(), None, "any")
    assert (gate.passed, gate.exit_code) == (False, EXIT_FAILED)
    assert "Cancel a booking" in gate.reasons[0]


def test_quarantined_failure_never_fails_the_gate() -> None:
    results = results_of(scenario("ok"), scenario("flaky", "failed", quarantined=True))
    gate = evaluate_gate(results, None, "any", min_pass_rate=1.0)
    assert (gate.passed, gate.exit_code) == (True, EXIT_PASSED)
    assert any("quarantined" in r for r in gate.reasons)


def test_gate_regression_mode_blocks_regressions_not_failures_the_baseline_had() -> None:
    current, comparison = run_results(), compare(run_results(), baseline_results())
    gate = evaluate_gate(current, comparison, "regression")
    assert not gate.passed and gate.exit_code == EXIT_FAILED
    assert gate.reasons[0] == "1 scenario regressed vs the baseline: Cancel a booking"

    # Failed in the baseline too (a verdict there): reported, not blocking. This test used to
    # add a new failing scenario here and expect a pass: that was the false pass it now blocks.
    before = results_of(scenario("a"), scenario("b", "failed"))
    now = results_of(scenario("a"), scenario("b", "failed"))
    gate = regression_gate(now, before)
    assert gate.passed and gate.exit_code == EXIT_PASSED
    assert gate.reasons == (
        "1 scenario failed or errored as in the baseline, or within main's noise (not blocking): b",
    )


@pytest.mark.parametrize("status", ["failed", "error"])
def test_a_new_scenario_that_fails_blocks_under_regression(status: str) -> None:
    """The scenario a pull request adds is not in main's baseline: its failure is no
    'regression', yet main never showed it failing, so the gate must not be green."""
    before = results_of(scenario("a"), scenario("b", "failed"))
    now = results_of(scenario("a"), scenario("b", "failed"), scenario("new one", status))
    gate = regression_gate(now, before)
    assert (gate.passed, gate.exit_code) == (False, EXIT_FAILED)
    assert gate.reasons == (
        "1 new scenario failed or errored: new one",
        "1 scenario failed or errored as in the baseline, or within main's noise (not blocking): b",
    )
    # quarantined, it is reported and does not block (quarantine means exactly that)
    calm = results_of(scenario("a"), scenario("new one", status, quarantined=True))
    assert regression_gate(calm, before).passed
    # and a new scenario that passes is no reason to block
    fine = results_of(scenario("a"), scenario("new one"))
    assert regression_gate(fine, before).passed


@pytest.mark.parametrize(
    ("baseline", "there"),
    [
        (scenario("b", "skipped", reason="not selected (tag team=x)", attempts=()), "skipped"),
        (scenario("b", "skipped", reason=NOT_RUN_NO_LLM, attempts=()), "skipped"),
        (scenario("b", "skipped", reason=NOT_RUN_INTERRUPTED, attempts=()), "skipped"),
        (scenario("b", "skipped", reason=f"{NOTHING_TO_CHECK}: no turn", attempts=()), "skipped"),
        (scenario("b", "skipped", quarantined=True, attempts=()), "skipped"),
        (scenario("b", "error", reason="agent did not boot"), "errored"),
    ],
    ids=[
        "not-selected",
        "needs-live-llm",
        "interrupted",
        "nothing-to-check",
        "quarantined",
        "error",
    ],
)
def test_a_failure_with_no_verdict_in_the_baseline_blocks(
    baseline: ScenarioResult, there: str
) -> None:
    """Skipped, not run or errored on main, failing a check now: main never showed it failing
    (an error there is no verdict), so it blocks like a regression, naming where it stood."""
    before = results_of(scenario("a"), baseline)
    now = results_of(scenario("a"), scenario("b", "failed"))
    gate = regression_gate(now, before)
    assert (gate.passed, gate.exit_code) == (False, EXIT_FAILED)
    assert gate.reasons == (
        f"1 scenario failed or errored with no verdict in the baseline: b ({there} there)",
    )


def test_an_error_now_blocks_after_a_skip_but_not_after_a_failure_or_an_error() -> None:
    """An error now is excused by main's failure or main's own error on the scenario (main
    had it broken too), never by a skip."""
    before = results_of(
        scenario("a"),
        scenario("b", "failed"),
        scenario("c", "error"),
        scenario("d", "skipped", reason="not selected (tag team=x)", attempts=()),
    )
    now = results_of(
        scenario("a"), scenario("b", "error"), scenario("c", "error"), scenario("d", "error")
    )
    gate = regression_gate(now, before)
    assert (gate.passed, gate.exit_code) == (False, EXIT_FAILED)
    assert gate.reasons == (
        "1 scenario failed or errored with no verdict in the baseline: d (skipped there)",
        "2 scenarios failed or errored as in the baseline, or within main's noise "
        "(not blocking): b, c",
    )


def test_every_blocking_kind_has_its_own_reason_line() -> None:
    before = results_of(
        scenario("a"), scenario("b", "skipped", reason="not selected (tag x)", attempts=())
    )
    now = results_of(scenario("a", "failed"), scenario("b", "failed"), scenario("c", "error"))
    gate = regression_gate(now, before)
    assert gate.reasons == (
        "1 scenario regressed vs the baseline: a",
        "1 new scenario failed or errored: c",
        "1 scenario failed or errored with no verdict in the baseline: b (skipped there)",
    )


def test_a_failure_hidden_behind_a_duplicated_id_blocks() -> None:
    """Results the loader would never write (two scenarios of one id, a hand-made file): the
    comparison keeps the first, which passed; the second's failure must not borrow that."""
    before = results_of(scenario("a"), scenario("b"))
    now = results_of(scenario("a"), scenario("b"), scenario("b", "failed"))
    gate = regression_gate(now, before)
    assert (gate.passed, gate.exit_code) == (False, EXIT_FAILED)
    assert gate.reasons == ("1 new scenario failed or errored: b",)


def test_a_disjoint_baseline_blocks_every_failure() -> None:
    """A baseline that shares no scenario with this run (all renamed, another suite) has
    verdicts, so --fail-on regression does not fall back to any; every failure is new and
    blocks all the same."""
    before = results_of(scenario("x"), scenario("y", "failed"))
    now = results_of(scenario("p"), scenario("q", "failed"), scenario("r", "error"))
    comparison = compare(now, before)
    assert [c.kind for c in comparison.changes] == ["new"] * 3 + ["removed"] * 2
    gate = evaluate_gate(now, comparison, "regression")
    assert (gate.passed, gate.exit_code) == (False, EXIT_FAILED)
    assert gate.reasons == ("2 new scenarios failed or errored: q, r",)
    passing = results_of(scenario("p"), scenario("q"))
    assert regression_gate(passing, before).passed


def test_quarantined_regression_does_not_block() -> None:
    before = results_of(scenario("a"))
    now = results_of(scenario("a", "failed", quarantined=True), scenario("b"))
    assert evaluate_gate(now, compare(now, before), "regression").passed


def test_regression_mode_without_baseline_acts_as_any() -> None:
    gate = evaluate_gate(run_results(), None, "regression")
    assert not gate.passed
    assert any("--fail-on regression acts as --fail-on any" in r for r in gate.reasons)


def test_never_mode_passes_but_still_says_why() -> None:
    gate = evaluate_gate(run_results(), None, "never")
    assert gate.passed and gate.exit_code == EXIT_PASSED
    assert any("not blocking" in r for r in gate.reasons)


@pytest.mark.parametrize(
    ("rate", "passes"), [(0.4, True), (0.39, True), (0.41, False), (0.9, False)]
)
def test_min_pass_rate(rate: float, passes: bool) -> None:
    # 2 of the 5 counted scenarios pass: 40%.
    gate = evaluate_gate(run_results(), None, "never", min_pass_rate=rate)
    assert gate.passed is passes
    if not passes:
        assert gate.reasons[0].startswith("pass rate 40.0% is below the minimum")


def test_min_pass_rate_applies_in_regression_mode_too() -> None:
    now = results_of(scenario("a"), scenario("b", "failed"))
    gate = evaluate_gate(now, compare(now, now), "regression", min_pass_rate=0.75)
    assert not gate.passed and "pass rate 50.0%" in gate.reasons[0]


def test_nothing_could_run_is_exit_3_whatever_fail_on_says() -> None:
    results = results_of(
        scenario("a", "error"), scenario("b", "error", quarantined=True), scenario("c", "skipped")
    )
    for mode in ("any", "regression", "never"):
        gate = evaluate_gate(results, None, mode)
        assert (gate.passed, gate.exit_code) == (False, EXIT_NOTHING_RAN)
        assert "nothing could run" in gate.reasons[0]


def test_one_failure_among_errors_is_a_normal_failure() -> None:
    results = results_of(scenario("a", "error"), scenario("b", "failed"))
    assert evaluate_gate(results, None).exit_code == EXIT_FAILED


def test_all_skipped_is_nothing_ran_not_a_pass() -> None:
    skipped = scenario("a", "skipped", reason="needs a simulated user: set --caller-model")
    gate = evaluate_gate(results_of(skipped), None, min_pass_rate=0.9)
    assert not gate.passed and gate.exit_code == EXIT_NOTHING_RAN
    assert "all 1 scenario(s) were skipped" in gate.reasons[0]
    assert "--caller-model" in gate.reasons[0]


def test_results_without_a_scenario_are_nothing_ran_unless_an_empty_shard() -> None:
    """Issue 18 item 2: no scenario is never a pass, except in a shard that says it is empty
    (the merge of every shard is gated)."""
    gate = evaluate_gate(results_of(), None)
    assert (gate.passed, gate.exit_code) == (False, EXIT_NOTHING_RAN)
    assert gate.reasons == ("nothing ran: the results hold no scenario",)
    empty = results_of()
    empty = dataclasses.replace(
        empty,
        metadata=dataclasses.replace(empty.metadata, shard="4/4", empty_shard=True),
    )
    gate = evaluate_gate(empty, None)
    assert (gate.passed, gate.exit_code) == (True, EXIT_PASSED)
    assert gate.reasons[0].startswith("empty shard 4/4: no selected scenario falls in it")


def test_only_quarantined_scenarios_fail_unless_allowed() -> None:
    """Issue 18 item 4: a run that counted no scenario gated nothing."""
    results = results_of(
        scenario("a", "failed", quarantined=True),
        scenario("b", quarantined=True),
        scenario("c", "skipped", reason="not selected (tag team=x)"),
    )
    gate = evaluate_gate(results, None)
    assert (gate.passed, gate.exit_code) == (False, EXIT_FAILED)
    assert gate.reasons == (
        "no scenario counted toward the gate: all 2 scenarios that ran are quarantined "
        "(--allow-all-quarantined to pass such a run)",
        "1 scenario quarantined and not passing (not blocking)",
    )
    allowed = evaluate_gate(results, None, allow_all_quarantined=True)
    assert (allowed.passed, allowed.exit_code) == (True, EXIT_PASSED)
    assert allowed.reasons[0] == (
        "no scenario counted toward the gate: all 2 scenarios that ran are quarantined (allowed)"
    )


def test_scenarios_the_error_brake_did_not_run_fail_the_gate() -> None:
    """Issue 18 item 1: quarantined errors trip the brake; the rest, never run, fail it."""
    why = (
        "not run (stopped early): the first 2 scenario(s) failed with the same agent-side "
        "cause (--max-errors 2): turn 1: the agent answered with an error"
    )
    user = TranscriptItem(kind="message", turn=1, role="user", text="hi")
    conversed = (Attempt("error", transcript=(user,)),)
    errors = [scenario(n, "error", quarantined=True, attempts=conversed) for n in "ab"]
    not_run = [scenario(n, "skipped", reason=why, attempts=()) for n in "cde"]
    for allow in (False, True):
        gate = evaluate_gate(results_of(*errors, *not_run), None, allow_all_quarantined=allow)
        assert (gate.passed, gate.exit_code) == (False, EXIT_FAILED)
        assert (
            "the run stopped early (3 scenarios not run): the first 2 scenario(s) failed with "
            "the same agent-side cause (--max-errors 2): turn 1: the agent answered with an error"
        ) in gate.reasons


def test_a_baseline_in_which_nothing_ran_gates_as_any_and_says_why() -> None:
    """Issue 18 item 8: against a baseline of errors and not-run scenarios nothing can regress,
    so --fail-on regression would pass anything: it gates as `any`, saying so."""
    baseline = results_of(
        scenario("a", "error"), scenario("b", "skipped", reason="not run (interrupted)")
    )
    current = results_of(scenario("a", "failed"), scenario("b", "passed"))
    gate = evaluate_gate(current, compare(current, baseline), "regression")
    assert (gate.passed, gate.exit_code) == (False, EXIT_FAILED)
    assert gate.reasons == (
        "1 scenario failed or errored: a",
        "the baseline has no scenario that ran to a verdict (every one errored or did not run): "
        "--fail-on regression acts as --fail-on any",
    )
    seen = results_of(scenario("a", "failed"), scenario("b", "error"))
    assert evaluate_gate(current, compare(current, seen), "regression").passed
