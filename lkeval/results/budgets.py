"""Latency and cost budgets: each miss is its own reason in the gate, the outputs and annotations.

Absolute budgets (``--max-latency``, a scenario's ``latency:``, ``--max-cost``) and regression
budgets against the baseline (``--latency-regression``, ``--cost-regression``). Two rules
keep them honest. A budget that cannot be checked is a miss, not a pass: a ``ttft_p95`` budget
on an agent that reports no TTFT, or a cost budget when some model is unpriced (a partial sum
would pass a run that may be over). And latency regressions follow the baseline diff's noise
rule: a delta with too few turns or inside the run's own spread is shown but never flagged.
A latency result measured with the agent's LiveKit Inference calls pinned to the low class (a
text simulation, ``--inference-class low``) says so in its text, wherever it is shown.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from lkeval.results.baseline import Comparison, MetricDelta
from lkeval.results.metrics import (
    LOW_CLASS_NOTE,
    Metrics,
    format_ms,
    measured_at_low_class,
    scenario_metrics,
    suite_metrics,
)
from lkeval.results.model import RunResults, ScenarioResult
from lkeval.results.pricing import format_cost

BudgetKind = Literal["latency", "cost", "latency_regression", "cost_regression"]


@dataclass(frozen=True)
class Budgets:
    """What the user allowed; ``latency`` in ms by statistic, regressions as fractions."""

    latency: dict[str, float] = field(default_factory=dict)
    max_cost_usd: float | None = None
    latency_regression: float | None = None
    cost_regression: float | None = None


@dataclass(frozen=True)
class BudgetMiss:
    """One budget the run missed; ``scenario_id`` None means the whole suite."""

    kind: BudgetKind
    text: str
    scenario_id: str | None = None
    label: str = ""
    file: str = ""
    line: int = 0


def check_budgets(
    results: RunResults, comparison: Comparison | None, budgets: Budgets | None
) -> tuple[BudgetMiss, ...]:
    """Every budget miss of the run: suite ones first, then per scenario in run order."""
    budgets = budgets or Budgets()
    suite = suite_metrics(results)
    misses = [
        BudgetMiss("latency", f"suite {text}") for text in _latency_misses(suite, budgets.latency)
    ]
    if budgets.max_cost_usd is not None:
        misses += [BudgetMiss("cost", t) for t in _cost_miss(suite, budgets.max_cost_usd)]
    for scenario in results.scenarios:
        if scenario.status == "skipped" or scenario.quarantined or not scenario.latency_budget:
            continue
        for text in _latency_misses(scenario_metrics(scenario), scenario.latency_budget):
            misses.append(_scenario_miss("latency", f"{scenario.label}: {text}", scenario))
    if comparison is not None:
        misses += _regressions(results, comparison, budgets)
    if measured_at_low_class(results.metadata):
        misses = [_noted(m) if m.kind.startswith("latency") else m for m in misses]
    return tuple(misses)


def _noted(miss: BudgetMiss) -> BudgetMiss:
    return dataclasses.replace(miss, text=f"{miss.text} ({LOW_CLASS_NOTE})")


def _latency_misses(metrics: Metrics, budget: dict[str, float]) -> list[str]:
    if metrics.turns == 0:
        return []
    found = []
    for stat, limit in budget.items():
        source, _, which = stat.rpartition("_")
        values = metrics.ttft if source == "ttft" else metrics.latency
        name = "TTFT" if source == "ttft" else "turn latency"
        if values is None:
            found.append(
                f"{name} {which} budget {format_ms(limit)} cannot be checked: "
                "the agent reported no TTFT"
            )
            continue
        actual = {"p50": values.p50, "p95": values.p95, "max": values.max}[which]
        if actual > limit:
            found.append(
                f"{name} {which} {format_ms(actual)} is over the budget {format_ms(limit)}"
            )
    return found


def _cost_miss(suite: Metrics, limit: float) -> list[str]:
    if suite.unpriced:
        return [
            f"cost cannot be checked against --max-cost {format_cost(limit)}: "
            f"{format_cost(suite.cost_usd, suite.unpriced)} (give --price MODEL=IN,OUT)"
        ]
    cost = suite.cost_usd or 0.0
    if cost > limit:
        return [f"cost {format_cost(cost)} is over the budget {format_cost(limit)}"]
    return []


def _regressions(results: RunResults, comparison: Comparison, budgets: Budgets) -> list[BudgetMiss]:
    misses: list[BudgetMiss] = []
    limit = budgets.latency_regression
    if limit is not None:
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
                misses.append(_scenario_miss("latency_regression", text, scenario))
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


def _scenario_miss(kind: BudgetKind, text: str, scenario: ScenarioResult) -> BudgetMiss:
    return BudgetMiss(
        kind, text, scenario.scenario_id, scenario.label, scenario.file, scenario.line
    )
