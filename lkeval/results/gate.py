"""The merge gate: turn a run's results into pass/fail and a process exit code.

The exit code is what a branch protection rule sees (:class:`lkeval.errors.ExitCode`):
``PASSED``; ``GATE_FAILED`` when scenarios failed, regressed, or the pass rate is too low; and
``NOTHING_RAN`` when every scenario that was not skipped ended in ``error`` (the agent never
booted, the LLM was down) or all were skipped. That is a broken setup, not a verdict on the
agent, so it is reported as such whatever ``fail_on`` says; when the judge is what failed, the
wording says so and does not blame the agent.

Quarantined scenarios are reported but never fail the gate: flaky LLM verdicts must not block
merges, which is the whole point of quarantining them. A run in which *every* scenario that ran
is quarantined gated nothing, though, and fails unless the user says otherwise
(``--allow-all-quarantined``); and scenarios the error brake did not run (``--max-errors``) fail
it like an interrupted run's, whatever the others did.

``--fail-on regression`` blocks every failure main never showed, not only the scenarios that
passed in the baseline and fail now: a new scenario that fails (the one a pull request adds)
and one that had no verdict in the baseline (skipped or not run there, or errored there while
it fails a check now) block too, each kind with its own reason. What it lets through is a
failure the baseline had as well, or one the pass-rate history calls noise. It also blocks a
scenario the sequential test passed whose attempts pass significantly less often than its
history on main (:func:`lkeval.results.history.slipped_passes`); under ``any`` that is a warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sized
from dataclasses import dataclass
from typing import Literal

from lkeval.errors import ExitCode
from lkeval.results.baseline import Comparison
from lkeval.results.calibration import WEAK_JUDGE_ALLOWED
from lkeval.results.metrics import BudgetMiss, Budgets, check_budgets
from lkeval.results.model import (
    NOT_RUN_INTERRUPTED,
    NOT_RUN_NO_LLM,
    NOT_RUN_STOPPED,
    RunResults,
    ScenarioResult,
)
from lkeval.results.regression_budgets import regression_misses
from lkeval.results.tally import Tally as Tally
from lkeval.results.tally import bucket as bucket
from lkeval.results.tally import format_rate, tally
from lkeval.scenarios.model import NOTHING_TO_CHECK
from lkeval.text.untrusted import label

FailOn = Literal["any", "regression", "never"]
FAIL_ON_CHOICES: tuple[FailOn, ...] = ("any", "regression", "never")


@dataclass(frozen=True)
class GateOutcome:
    """The gate's decision, its exit code, and the sentences that explain it."""

    passed: bool
    exit_code: ExitCode
    reasons: tuple[str, ...] = ()
    budget_misses: tuple[BudgetMiss, ...] = ()


JUDGE_FAILED = "judge failed"
"""How an attempt's reason starts when the judge, not the agent, kept it from a verdict."""


def _all_errors_reason(errored: list[ScenarioResult]) -> str:
    """Why every scenario errored, without blaming the agent for a judge that failed."""
    judged_out = [s for s in errored if JUDGE_FAILED in s.reason]
    if len(judged_out) == len(errored):
        first = errored[0].reason
        detail = first[first.index(JUDGE_FAILED) :]
        return (
            f"nothing could be judged: the judge failed in all {len(errored)} scenario(s) that "
            f"were not skipped; the agent is not at fault ({detail})"
        )
    if judged_out:
        return (
            f"nothing could run: all {len(errored)} scenario(s) that were not skipped ended in "
            f"error ({len(judged_out)} of them because the judge failed; the others: agent did "
            "not boot, or a dependency is down)"
        )
    return (
        f"nothing could run: all {len(errored)} scenario(s) that were not skipped ended in "
        "error (agent did not boot, or a dependency is down)"
    )


def evaluate_gate(
    results: RunResults,
    comparison: Comparison | None,
    fail_on: FailOn = "any",
    min_pass_rate: float | None = None,
    budgets: Budgets | None = None,
    allow_nothing_to_check: bool = False,
    allow_all_quarantined: bool = False,
    no_baseline: str | None = None,
) -> GateOutcome:
    """Decide the gate. See the module docstring for the exit codes.

    ``no_baseline``: why a baseline that was asked for is not there (``--baseline
    github:main`` found no run): a note ``no baseline: <why>``, and ``--fail-on regression``
    acts as ``any``, so a missing baseline can block a merge but never wave one through.

    A scenario that had nothing to check (found before anything booted, not played) fails
    the gate unless ``allow_nothing_to_check``: a check dropped by mistake must not pass. A run
    in which no scenario counted (every one that ran is quarantined) fails it unless
    ``allow_all_quarantined``. An empty shard (``lkeval run --shard I/N`` with more shards than
    scenarios) passes with a note: the merge of all shards is what is gated.

    A budget miss (:func:`lkeval.results.metrics.check_budgets`) fails the gate on its own, as
    its own reason; with ``--fail-on never`` it is reported and does not block.
    """
    if results.metadata.empty_shard:
        return GateOutcome(True, ExitCode.PASSED, (empty_shard_note(results),))
    broken = _nothing_ran(results, allow_nothing_to_check)
    if broken is not None:
        return broken
    ran = [s for s in results.scenarios if s.status != "skipped"]
    counted = [s for s in ran if not s.quarantined]
    bad = [s for s in counted if s.status in ("failed", "error")]
    failures, notes = _by_fail_on(results, comparison, fail_on, bad, no_baseline)

    _check_pass_rate(results, min_pass_rate, failures, notes)
    notes += _not_blocking(ran, counted)

    unchecked = _nothing_to_check(results, allow_nothing_to_check)
    if unchecked:
        (notes if allow_nothing_to_check else failures).append(unchecked)

    regressions = regression_misses(results, comparison, budgets) if comparison else []
    misses = check_budgets(results, budgets, regressions)
    for miss in misses:
        (notes if fail_on == "never" else failures).append(f"budget missed: {miss.text}")

    failures.extend(incomplete_run(results))
    if results.metadata.no_credentials:
        share = evaluated_share(results)
        (failures if share.startswith(NO_CREDENTIALS_FAILED) else notes).insert(0, share)
    if not counted:
        _all_quarantined(ran, allow_all_quarantined, failures, notes)
    if failures:
        return GateOutcome(False, ExitCode.GATE_FAILED, tuple(failures + notes), misses)
    if not bad and counted:
        notes.insert(0, f"all {_count(counted)} passed")
    return GateOutcome(True, ExitCode.PASSED, tuple(notes), misses)


def _check_pass_rate(
    results: RunResults, min_pass_rate: float | None, failures: list[str], notes: list[str]
) -> None:
    """``--min-pass-rate``: a failure when the pass rate is below it, a note when no
    scenario counted toward it."""
    if min_pass_rate is None:
        return
    rate = tally(results).pass_rate
    if rate is None:
        notes.append("no scenario counted toward the pass rate; --min-pass-rate not applied")
    elif rate + 1e-9 < min_pass_rate:
        failures.append(
            f"pass rate {format_rate(rate)} is below the minimum {format_rate(min_pass_rate)}"
        )


def _not_blocking(ran: list[ScenarioResult], counted: list[ScenarioResult]) -> list[str]:
    """Notes of what does not block: quarantined scenarios not passing, and passes decided
    by a judge the user let run though it failed its canary."""
    notes = []
    flaky = [s for s in ran if s.quarantined and s.status != "passed"]
    if flaky:
        notes.append(f"{_count(flaky)} quarantined and not passing (not blocking)")
    weak = [s for s in counted if s.status == "passed" and s.reason.startswith(WEAK_JUDGE_ALLOWED)]
    if weak:  # the user's choice, named on the line that decides the merge
        notes.append(f"{_count(weak)} {WEAK_JUDGE_ALLOWED.rstrip(':')}: {_labels(weak)}")
    return notes


def _all_quarantined(
    ran: list[ScenarioResult], allowed: bool, failures: list[str], notes: list[str]
) -> None:
    """No scenario counted toward the gate: every one that ran is quarantined. First among
    the reasons: a failure, or a note with ``--allow-all-quarantined``."""
    quarantined = f"all {_count(ran)} that ran are quarantined"
    if allowed:
        notes.insert(0, f"no scenario counted toward the gate: {quarantined} (allowed)")
    else:
        failures.insert(
            0,
            f"no scenario counted toward the gate: {quarantined} "
            "(--allow-all-quarantined to pass such a run)",
        )


def _nothing_ran(results: RunResults, allow_nothing_to_check: bool) -> GateOutcome | None:
    """The broken-setup outcome (exit 3), or None when something really ran."""
    if not results.scenarios:
        return GateOutcome(
            passed=False,
            exit_code=ExitCode.NOTHING_RAN,
            reasons=("nothing ran: the results hold no scenario",),
        )
    ran = [s for s in results.scenarios if s.status != "skipped"]
    if (
        ran
        and results.metadata.no_credentials
        and all(s.reason.startswith(NOT_RUN_NO_LLM) for s in ran)
    ):
        # without credentials, nothing replayed in full: nothing was evaluated
        return GateOutcome(False, ExitCode.NOTHING_RAN, (evaluated_share(results),))
    # Exit 3 is for a broken setup: nothing could even be talked to. Once a conversation
    # happened, errors (a judge down, a failed turn) are the gate failing (exit 1).
    if ran and all(s.status == "error" and not conversed(s) for s in ran):
        return GateOutcome(
            passed=False,
            exit_code=ExitCode.NOTHING_RAN,
            reasons=(_all_errors_reason(ran),),
        )
    if results.scenarios and not ran:
        # A typo in --tag, or scenarios that need a caller model nobody configured: a gate
        # that passes on nothing would hide it.
        unchecked = _nothing_to_check(results, allow_nothing_to_check)
        why = f"; {unchecked}" if unchecked else f" ({results.scenarios[0].reason or 'no reason'})"
        return GateOutcome(
            passed=False,
            exit_code=ExitCode.NOTHING_RAN,
            reasons=(f"nothing ran: all {len(results.scenarios)} scenario(s) were skipped{why}",),
        )
    return None


def _by_fail_on(
    results: RunResults,
    comparison: Comparison | None,
    fail_on: FailOn,
    bad: list[ScenarioResult],
    no_baseline: str | None = None,
) -> tuple[list[str], list[str]]:
    """(failures, notes) of the ``--fail-on`` rule over the counted failures ``bad``."""
    failures: list[str] = []
    notes: list[str] = []
    mode = fail_on
    missing = f"no baseline: {no_baseline}" if no_baseline else "no baseline given"
    if mode == "regression" and comparison is None:
        notes.append(f"{missing}: --fail-on regression acts as --fail-on any")
        mode = "any"
    elif comparison is None and no_baseline:
        notes.append(missing)
    elif mode == "regression" and comparison is not None and comparison.baseline_verdicts == 0:
        # Nothing passed in it, so nothing could regress: a blind gate that would pass anything.
        notes.append(
            "the baseline has no scenario that ran to a verdict (every one errored or did not "
            "run): --fail-on regression acts as --fail-on any"
        )
        mode = "any"
    if mode == "any" and bad:
        failures.append(f"{_count(bad)} failed or errored: {_labels(bad)}")
    elif mode == "regression" and comparison is not None:
        blocking, excused = _against_baseline(comparison, bad)
        failures += blocking
        notes += excused
    elif mode == "never" and bad:
        notes.append(f"{_count(bad)} failed or errored (--fail-on never: not blocking)")
    slipped = _slipped(results, comparison)
    if slipped:
        text = (
            f"{_count(slipped)} passed the sequential test but significantly less often than "
            f"on main: {_labels(slipped)}"
        )
        if mode == "regression":
            failures.append(text)
        else:
            notes.append(f"warning: {text} (blocks under --fail-on regression)")
    return failures, notes


def _slipped(results: RunResults, comparison: Comparison | None) -> list[ScenarioResult]:
    """The counted scenarios that passed, whose attempts the history calls significantly below
    main (:attr:`~lkeval.results.baseline.Comparison.slipped`)."""
    if comparison is None:
        return []
    ids = {c.scenario_id for c in comparison.slipped}
    return [s for s in results.scenarios if s.scenario_id in ids and not s.quarantined]


def _against_baseline(
    comparison: Comparison, bad: list[ScenarioResult]
) -> tuple[list[str], list[str]]:
    """(failures, notes) of ``--fail-on regression`` over the counted failures ``bad``.

    What blocks is every failure main never showed: a regression (passed there), a new
    scenario, and one with no verdict there (skipped, not run, or errored while it fails a
    check now: :attr:`~lkeval.results.baseline.ScenarioChange.unaccounted`). A failure the
    baseline had too, or that the history calls noise, does not. A scenario the comparison
    does not describe (unknown, or a second one of a duplicated id, matched by the first one's
    change) blocks as new: a gap must not wave a failure through.
    """
    changes = {c.scenario_id: c for c in reversed(comparison.changes) if c.current is not None}
    regressed, new, unjudged, accounted = [], [], [], []
    where: dict[str, str] = {}
    for scenario in bad:
        change = changes.get(scenario.scenario_id)
        if change is not None and change.kind == "regression":
            regressed.append(scenario)
        elif (
            change is None
            or change.current != scenario.status
            or (change.unaccounted and change.baseline is None)
        ):
            new.append(scenario)
        elif change.unaccounted:
            unjudged.append(scenario)
            where[scenario.scenario_id] = f"{change.baseline_without_verdict} there"
        else:
            accounted.append(scenario)
    failures: list[str] = []
    if regressed:
        failures.append(f"{_count(regressed)} regressed vs the baseline: {_labels(regressed)}")
    if new:
        failures.append(f"{_count(new, 'new scenario')} failed or errored: {_labels(new)}")
    if unjudged:
        failures.append(
            f"{_count(unjudged)} failed or errored with no verdict in the baseline: "
            + _labels(unjudged, where=where)
        )
    notes = []
    if accounted:
        notes.append(
            f"{_count(accounted)} failed or errored as in the baseline, or within main's "
            f"noise (not blocking): {_labels(accounted)}"
        )
    return failures, notes


def gate_line(gate: GateOutcome) -> str:
    """The one line that ends every run: the verdict and why."""
    if gate.passed:
        state = "passed"
    elif gate.exit_code == ExitCode.NOTHING_RAN:
        state = f"NOTHING RAN (exit {int(gate.exit_code)})"
    else:
        state = f"FAILED (exit {int(gate.exit_code)})"
    why = "; ".join(gate.reasons)
    return f"lk-eval gate: {state}" + (f" — {why}" if why else "")


def conversed(scenario: ScenarioResult) -> bool:
    """Did any attempt get as far as a caller turn?"""
    return any(
        item.kind == "message" and item.role == "user"
        for attempt in scenario.attempts
        for item in attempt.transcript
    )


def incomplete_run(results: RunResults) -> list[str]:
    """Why these results cannot pass whatever they hold: the run was interrupted or stopped
    early by the error brake, or a merge lacks shards. Scenarios that never ran are not
    failures, but a gate that passes on part of the suite would hide the rest."""
    out = []
    if results.metadata.interrupted:
        not_run = sum(1 for s in results.scenarios if s.reason == NOT_RUN_INTERRUPTED)
        out.append(f"the run was interrupted ({_count(range(not_run))} not run)")
    stopped = [s for s in results.scenarios if s.reason.startswith(NOT_RUN_STOPPED)]
    if stopped:
        why = stopped[0].reason.removeprefix(NOT_RUN_STOPPED).lstrip(": ")
        out.append(f"the run stopped early ({_count(stopped)} not run): {why}")
    if results.metadata.missing_shards:
        missing = ", ".join(results.metadata.missing_shards)
        out.append(f"partial results: shard(s) {missing} missing (merged with --allow-partial)")
    return out


NO_CREDENTIALS_FAILED = "not every scenario could be evaluated"
FORK_DOCS = "docs/action.md#pull-requests-from-forks"


def evaluated_share(results: RunResults) -> str:
    """How much of a run without LLM credentials (a fork's PR, from cassettes) was evaluated.

    A scenario that needed a live call is one the change under test altered (or a new one):
    the gate cannot pass without it, whatever ``--fail-on`` or quarantine say, so the sentence
    is a failure then and a note otherwise.
    """
    ran = [s for s in results.scenarios if s.status != "skipped"]
    not_run = [s for s in ran if s.reason.startswith(NOT_RUN_NO_LLM)]
    evaluated = len(ran) - len(not_run)
    share = f"{evaluated} of {len(ran)} ({format_rate(evaluated / len(ran) if ran else None)})"
    if not not_run:
        return (
            f"no LLM credentials (a fork's pull request): all {share} evaluated from cassettes, "
            "each replayed in full"
        )
    return (
        f"{NO_CREDENTIALS_FAILED}: {share} evaluated from cassettes; {_count(not_run)} "
        f"need a live LLM and there are no credentials (a fork's pull request): "
        f"{_labels(not_run)}; evaluate it with credentials ({FORK_DOCS})"
    )


def empty_shard_note(results: RunResults) -> str:
    """Why an empty shard passes: none of the suite's scenarios fell in it."""
    shard = results.metadata.shard or "?"
    return (
        f"empty shard {shard}: no selected scenario falls in it (more shards than scenarios); "
        "`lkeval merge` the shards' results and `lkeval report` gates the whole suite"
    )


def _nothing_to_check(results: RunResults, allowed: bool) -> str:
    """The gate's sentence on scenarios that had nothing to check (quarantined ones aside)."""
    found = [
        s
        for s in results.scenarios
        if s.status == "skipped" and not s.quarantined and s.reason.startswith(NOTHING_TO_CHECK)
    ]
    if not found:
        return ""
    tail = "(allowed)" if allowed else "(give each a check, or --allow-nothing-to-check)"
    return f"{_count(found)} had nothing to check: {_labels(found)} {tail}"


def _count(items: Sized, noun: str = "scenario") -> str:
    n = len(items)
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _labels(
    scenarios: list[ScenarioResult], limit: int = 5, where: Mapping[str, str] | None = None
) -> str:
    """The first ``limit`` labels (bounded, one line each), each with its ``where`` note."""
    notes = where or {}
    names = ", ".join(
        label(s.label) + (f" ({notes[s.scenario_id]})" if s.scenario_id in notes else "")
        for s in scenarios[:limit]
    )
    if len(scenarios) > limit:
        names += f" and {len(scenarios) - limit} more"
    return names
