"""Is a results file's recorded status what its attempts give? ``lkeval report`` asks first.

``lkeval report`` gates files another job wrote (the fork-safe ``workflow_run`` recipe reads an
artifact a pull request's code produced). A hand-edited ``status`` must not decide the gate: each
scenario's status is recomputed from its attempts, as the engine decided it (the fixed
``--repeat``/``--min-pass`` plan, the sequential test from its recorded votes, an interrupted
scenario, one with no attempt), and a file whose recorded status disagrees in either direction
is refused (exit 2) naming the scenario.
"""

from __future__ import annotations

from lkeval.results.calibration import JUDGE_UNFIT, rule_with
from lkeval.results.model import NOT_RUN_NO_LLM, RunResults, ScenarioResult, Status
from lkeval.results.recompute import attempts_problem, options_problem
from lkeval.results.sampling import SequentialRule, replay, rule_in_force
from lkeval.text.untrusted import label

INTERRUPTED_PREFIX = "interrupted:"
"""How the reason of a scenario cut short by a signal begins (lkeval.run.engine)."""


def expected_statuses(scenario: ScenarioResult, rule: SequentialRule) -> tuple[Status, ...]:
    """The statuses the engine can give this scenario from its attempts (more than one only
    where a reason outside the attempts decides: a scenario with no attempt that ran)."""
    ran = [a for a in scenario.attempts if a.status != "skipped"]
    if not ran:  # not selected, not run, braked; or an error before any attempt (a fork's PR)
        return ("skipped", "error")
    if scenario.reason.startswith(INTERRUPTED_PREFIX):
        return ("error",)  # cut short before its decision: never a pass
    if scenario.reason.startswith(NOT_RUN_NO_LLM):
        return ("error",)  # needed a live call on a run without credentials: not evaluated
    if scenario.reason.startswith(JUDGE_UNFIT):
        return ("error",)  # a pass its judge could not vouch for (lkeval.run.engine): never one
    sequential = scenario.sampling is not None and scenario.sampling.mode == "sequential"
    if sequential:
        # The error a calibration set, held within its bounds: this only checks that the file
        # is consistent; the gate then re-decides with the baseline's calibration (recheck).
        recorded = scenario.sampling.judge_error if scenario.sampling else None
        outcome = replay(rule_with(rule, recorded), scenario).outcome
        passed = outcome == "passed"
        if outcome == "undecided":
            return ("error",)
    else:
        passed = scenario.passes >= max(1, scenario.min_pass)
    if passed:
        return ("passed",)
    return ("failed",) if any(a.status == "failed" for a in ran) else ("error",)


def suite_problem(results: RunResults) -> str:
    """A scenario of the fingerprinted suite missing from a whole-run file (deleting a failing
    scenario from the file must not pass it), or one the suite does not hold ("" when none).
    A single shard's file holds only its part of the suite."""
    meta = results.metadata
    if meta.suite is None:
        return ""
    held = [s.scenario_id for s in results.scenarios]
    stray = [sid for sid in held if sid not in meta.suite.scenarios]
    if stray:
        return f"scenario {stray[0]!r} is not in the suite the file's fingerprint names"
    if meta.shard or meta.missing_shards:
        return ""
    gone = [sid for sid in meta.suite.scenarios if sid not in set(held)]
    if gone:
        more = f" (and {len(gone) - 1} more)" if len(gone) > 1 else ""
        return f"scenario {gone[0]!r}{more} of the suite its fingerprint names is not in the file"
    return ""


def status_problem(results: RunResults) -> str:
    """Why the file's statuses cannot be trusted ("" when each follows from its attempts and
    the file holds the suite it names)."""
    problem = suite_problem(results)
    if problem:
        return f"{problem}; refusing to gate this file"
    problem = attempts_problem(results)
    if problem:
        return f"{problem}: the file contradicts itself; refusing to gate this file"
    rule = rule_in_force(results)
    for scenario in results.scenarios:
        allowed = expected_statuses(scenario, rule)
        if scenario.status in allowed:
            continue
        passes = scenario.passes
        return (
            f"scenario {label(scenario.label)} is recorded {scenario.status}, but its attempts "
            f"give {' or '.join(allowed)} ({passes} of {len(scenario.attempts)} attempt(s) "
            f"passed{_needs(scenario)}): the status disagrees with the attempts; refusing to "
            "gate this file"
        )
    problem = options_problem(results)
    if problem:
        return f"{problem}: the file contradicts itself; refusing to gate this file"
    return ""


def _needs(scenario: ScenarioResult) -> str:
    if scenario.sampling is not None and scenario.sampling.mode == "sequential":
        return ", decided by the sequential test"
    return f", it needs {max(1, scenario.min_pass)}"


__all__ = ["expected_statuses", "status_problem", "suite_problem"]
