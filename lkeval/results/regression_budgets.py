"""The regression budgets (``--latency-regression``, ``--cost-regression``) a comparison with
the baseline misses: a noisy delta never does, and an unpriced side makes cost uncheckable,
which is a miss (never a silent pass)."""

from __future__ import annotations

from lkeval.results.baseline import Comparison
from lkeval.results.deltas import MetricDelta
from lkeval.results.metrics import BudgetMiss, Budgets, format_ms, scenario_miss
from lkeval.results.model import RunResults


def regression_misses(
    results: RunResults, comparison: Comparison, budgets: Budgets | None
) -> list[BudgetMiss]:
    """The regression budgets (``--latency-regression``, ``--cost-regression``) this
    comparison misses: noisy deltas never do; an unpriced side makes cost uncheckable, a miss."""
    if budgets is None:
        return []
    misses: list[BudgetMiss] = []
    limit = budgets.latency_regression
    if limit is not None and comparison.latency_comparable:
        if _over(comparison.latency_p95, limit):
            misses.append(
                BudgetMiss(
                    "latency_regression",
                    f"suite p95 {_delta_ms(comparison.latency_p95)}"
                    f" is over --latency-regression {limit:.0%}",
                )
            )
        scenarios = {s.scenario_id: s for s in results.scenarios if not s.quarantined}
        for change in comparison.changes:
            scenario = scenarios.get(change.scenario_id)
            if scenario is not None and change.latency_p95 and _over(change.latency_p95, limit):
                text = (
                    f"{scenario.label}: p95 {_delta_ms(change.latency_p95)} is over "
                    f"--latency-regression {limit:.0%}"
                )
                misses.append(scenario_miss("latency_regression", text, scenario))
    if budgets.cost_regression is not None:
        cost = comparison.cost
        if cost.before is None or cost.after is None:
            if cost.after is not None or cost.before is not None or comparison.cost_unpriced:
                misses.append(
                    BudgetMiss(
                        "cost_regression",
                        "cost regression cannot be checked:"
                        " unpriced tokens in this run or the baseline",
                    )
                )
        elif _over(cost, budgets.cost_regression):
            misses.append(
                BudgetMiss(
                    "cost_regression",
                    f"cost ${cost.before:.4f} → ${cost.after:.4f} "
                    f"({cost.percent:+.0f}%) is over --cost-regression "
                    f"{budgets.cost_regression:.0%}",
                )
            )
    return misses


def _over(delta: MetricDelta, limit: float) -> bool:
    return not delta.noisy and delta.percent is not None and delta.percent > limit * 100


def _delta_ms(delta: MetricDelta) -> str:
    percent = f" ({delta.percent:+.0f}%)" if delta.percent is not None else ""
    return f"{format_ms(delta.before)} → {format_ms(delta.after)}{percent}"


__all__ = ["regression_misses"]
