"""Budgets and metrics in a GitHub step: an annotation per budget miss, the headline figures
as Action outputs. (:func:`lkeval.results.metrics.check_budgets` decides the misses; the budget
flags are parsed in :mod:`lkeval.cli.options`.)
"""

from __future__ import annotations

from lkeval.publish.github.workflow import annotation_path
from lkeval.results.baseline import Comparison
from lkeval.results.gate import GateOutcome
from lkeval.results.metrics import suite_metrics
from lkeval.results.model import RunResults
from lkeval.results.wording import plain
from lkeval.text.untrusted import command


def budget_annotations(gate: GateOutcome, workspace: str | None) -> list[str]:
    """One annotation per budget miss: an error when it blocks, a warning when it does not.

    A scenario's miss points at the scenario in its YAML file; a suite miss has no file.
    """
    level = "warning" if gate.passed else "error"
    lines = []
    for miss in gate.budget_misses:
        where: dict[str, str | int | None] = {}
        if miss.file:
            where = {"file": annotation_path(miss.file, workspace), "line": miss.line or None}
        title = "lk-eval: latency budget" if "latency" in miss.kind else "lk-eval: cost budget"
        lines.append(command(level, plain(miss.text), **where, title=title))
    return lines


def metric_outputs(
    results: RunResults, comparison: Comparison | None, gate: GateOutcome
) -> dict[str, str]:
    """The headline figures as Action outputs (empty string when unknown or unpriced)."""
    suite = suite_metrics(results)
    cost = "" if suite.cost_usd is None or suite.unpriced else f"{suite.cost_usd:.6f}"
    outputs = {
        "latency-p95-ms": f"{suite.latency.p95:.0f}" if suite.latency else "",
        "ttft-p95-ms": f"{suite.ttft.p95:.0f}" if suite.ttft else "",
        "cost-usd": cost,
        "latency-p95-delta-pct": "",
        "cost-delta-usd": "",
        "budget-misses": str(len(gate.budget_misses)),
    }
    if comparison is not None:
        latency = comparison.latency_p95.percent
        outputs["latency-p95-delta-pct"] = "" if latency is None else f"{latency:+.1f}"
        before, after = comparison.cost.before, comparison.cost.after
        if before is not None and after is not None:
            outputs["cost-delta-usd"] = f"{after - before:+.6f}"
    return outputs
