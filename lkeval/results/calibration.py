"""What a scenario's judge calibration (``lkeval calibrate``) does to its stopping rule.

The sequential test assumes a judge that flips 10% of its verdicts (``SequentialRule``). A
calibration measures, per scenario, how often the judge passed negative controls (known-bad
variants of a passing transcript) and failed the passing transcript itself. The rule of that
scenario then assumes the larger of the two rates' upper 95% Wilson bounds (a calibration on few
votes claims little), rounded up to a hundredth and held within
[:data:`MIN_JUDGE_ERROR`, :data:`MAX_JUDGE_ERROR`]: between those the test keeps its guarantees
(a 90%-broken scenario caught in at least 99% of runs, ``docs/sampling.md``), spending more
attempts on a scenario whose judge is noisier. A judge that passes half of a scenario's broken
controls (or fails half the votes on its good transcript) cannot tell that scenario's good
conversations from its broken ones, and the reports say so; and its judge's passes cannot pass
the gate: the scenario is an ``error`` naming the counts (:func:`unfit_reason`), unless
``--allow-weak-judge``, which the gate line then names.

Only a calibration from the baseline's history is used (a pull request's own results file could
claim any rate), keyed by the scenario's content digest like the history itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from lkeval.results.model import Calibration, History, RunResults
from lkeval.results.pass_rates import wilson_interval
from lkeval.results.sampling import SequentialRule, judge_passed

MIN_JUDGE_ERROR = 0.05
MAX_JUDGE_ERROR = 0.25
#: How the reason of a scenario begins whose passing decision its judge could not vouch for
#: (a calibration that says it cannot tell, or a paired known-bad control it passed too).
JUDGE_UNFIT = "judge unfit:"
#: How the reason of a scenario begins that passed on such a judge by ``--allow-weak-judge``.
WEAK_JUDGE_ALLOWED = "passed on a judge measured unfit (--allow-weak-judge):"


def error_bound(calibration: Calibration) -> float:
    """The larger upper 95% Wilson bound of the false-pass and the false-fail rate."""
    false_pass = wilson_interval(calibration.false_passes, calibration.control_votes)[1]
    false_fail = wilson_interval(calibration.false_fails, calibration.good_votes)[1]
    return max(false_pass, false_fail)


def judge_error(calibration: Calibration) -> float:
    """The judge error the scenario's stopping rule assumes (see the module docstring)."""
    bound = math.ceil(error_bound(calibration) * 100 - 1e-9) / 100
    return min(MAX_JUDGE_ERROR, max(MIN_JUDGE_ERROR, bound))


def cannot_tell(calibration: Calibration) -> bool:
    """The judge passed at least half the broken controls, or failed at least half the votes
    on the transcript it once passed: its verdicts on this scenario are no better than a coin.
    (Few votes alone only raise the error the rule assumes.)"""
    c = calibration
    return 2 * c.false_passes >= c.control_votes > 0 or 2 * c.false_fails >= c.good_votes > 0


def describe_calibration(calibration: Calibration) -> str:
    """``judge passed 2 of 40 broken controls, failed 0 of 40 good; assumed error 0.09``."""
    return (
        f"judge passed {calibration.false_passes} of {calibration.control_votes} broken "
        f"controls, failed {calibration.false_fails} of {calibration.good_votes} good; "
        f"assumed error {judge_error(calibration):.2f}"
    )


def unfit_reason(calibration: Calibration) -> str | None:
    """Why the judge's verdicts on this scenario cannot pass the gate (:func:`cannot_tell`), in
    the calibration's own counts; None when it can tell."""
    c = calibration
    if not cannot_tell(c):
        return None
    if 2 * c.false_passes >= c.control_votes > 0:
        why = f"the judge passed {c.false_passes} of {c.control_votes} known-bad controls"
    else:
        why = f"the judge failed {c.false_fails} of {c.good_votes} votes on a good conversation"
    when = f", {c.measured_at}" if c.measured_at else ""
    return f"{why} of this scenario (lkeval calibrate{when})"


def calibrations(
    history: History | None, digests: Mapping[str, str]
) -> dict[str, tuple[str, Calibration]]:
    """Scenario id -> (content digest, calibration) for every calibrated scenario of
    ``history`` whose content is the one in ``digests`` (all of them when ``digests`` is
    empty: the engine checks each scenario's digest itself)."""
    if history is None:
        return {}
    found = {}
    for scenario_id, entry in sorted(history.scenarios.items()):
        if entry.calibration is None:
            continue
        if digests and digests.get(scenario_id) != entry.digest:
            continue
        found[scenario_id] = (entry.digest, entry.calibration)
    return found


def calibrated_errors(
    history: History | None, digests: Mapping[str, str]
) -> dict[str, tuple[str, float]]:
    """Scenario id -> (content digest, judge error) of :func:`calibrations`."""
    found = calibrations(history, digests)
    return {sid: (digest, judge_error(c)) for sid, (digest, c) in found.items()}


def unfit_passes(results: RunResults, history: History | None) -> RunResults:
    """``results`` with each pass the conversation judge gave on a scenario whose calibration in
    ``history`` (a trusted baseline's) says it cannot tell made an ``error``, as ``lkeval run``
    decides it, unless the file says ``--allow-weak-judge`` let it pass (the gate line then
    names it). ``lkeval report`` gates a file a pull request may have written with this."""
    digests = results.metadata.suite.scenarios if results.metadata.suite else {}
    found = calibrations(history, digests) if digests else {}
    scenarios = []
    for scenario in results.scenarios:
        entry = found.get(scenario.scenario_id)
        why = unfit_reason(entry[1]) if entry is not None else None
        judged = any(a.status == "passed" and judge_passed(a) for a in scenario.attempts)
        if (
            why is not None
            and scenario.status == "passed"
            and judged
            and not scenario.reason.startswith(WEAK_JUDGE_ALLOWED)
        ):
            reason = f"{JUDGE_UNFIT} {why}: its passes cannot pass the gate (--allow-weak-judge)"
            scenario = replace(scenario, status="error", reason=reason)
        scenarios.append(scenario)
    return replace(results, scenarios=tuple(scenarios))


def rule_with(rule: SequentialRule, error: float | None) -> SequentialRule:
    """``rule`` assuming the judge error ``error`` (None: unchanged); out-of-range values are
    held within the bounds."""
    if error is None:
        return rule
    return replace(rule, judge_error=min(MAX_JUDGE_ERROR, max(MIN_JUDGE_ERROR, error)))


__all__ = [
    "JUDGE_UNFIT",
    "MAX_JUDGE_ERROR",
    "MIN_JUDGE_ERROR",
    "WEAK_JUDGE_ALLOWED",
    "calibrated_errors",
    "calibrations",
    "cannot_tell",
    "describe_calibration",
    "error_bound",
    "judge_error",
    "rule_with",
    "unfit_passes",
    "unfit_reason",
]
