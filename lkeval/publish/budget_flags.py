"""Budgets and metrics at the edges: the flags of ``lkeval run``/``report``, outputs, annotations.

Parsed by argparse types, so a typo is one usage line naming the flag (exit 2), never a
budget silently read as "no budget".
"""

from __future__ import annotations

import argparse
from typing import Any

from lkeval.publish.github.workflow import annotation_path, command
from lkeval.results.baseline import Comparison
from lkeval.results.budgets import Budgets
from lkeval.results.gate import GateOutcome
from lkeval.results.metrics import suite_metrics
from lkeval.results.model import RunResults
from lkeval.results.wording import plain
from lkeval.scenarios.latency import parse_latency_flag


def _latency(text: str) -> dict[str, float]:
    try:
        return parse_latency_flag(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _usd(text: str) -> float:
    try:
        value = float(text.strip().removeprefix("$"))
    except ValueError:
        value = -1.0
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give USD per run, e.g. 2.50")
    return value


def _percent(text: str) -> float:
    raw = text.strip()
    try:
        value = float(raw.removesuffix("%")) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        value = -1.0
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a percentage like 20% or 0.2")
    return value


def add_budget_arguments(group: Any) -> None:
    """Add ``--max-latency``, ``--max-cost``, ``--latency-regression``, ``--cost-regression``."""
    group.add_argument(
        "--max-latency",
        type=_latency,
        metavar="STAT=DURATION",
        help="fail when the suite's turn latency is over budget: p50|p95|max|ttft_p50|"
        "ttft_p95|ttft_max, e.g. p95=1.5s or p95=1200ms,ttft_p95=600ms "
        "(per scenario: latency: in the YAML)",
    )
    group.add_argument(
        "--max-cost",
        type=_usd,
        metavar="USD",
        help="fail when the run's estimated cost (agent + caller + judge) is over USD; "
        "unpriced models make it uncheckable, which fails too (see --price)",
    )
    group.add_argument(
        "--latency-regression",
        type=_percent,
        metavar="PERCENT",
        help="with --baseline: fail when p95 turn latency (suite or a scenario) grew by more "
        "than PERCENT, e.g. 20%%; noisy deltas (few turns, within the spread) never fail",
    )
    group.add_argument(
        "--cost-regression",
        type=_percent,
        metavar="PERCENT",
        help="with --baseline: fail when the run's cost grew by more than PERCENT, e.g. 25%%",
    )


def budgets_from_args(args: argparse.Namespace) -> Budgets:
    """The :class:`Budgets` the flags ask for (all off when absent)."""
    return Budgets(
        latency=getattr(args, "max_latency", None) or {},
        max_cost_usd=getattr(args, "max_cost", None),
        latency_regression=getattr(args, "latency_regression", None),
        cost_regression=getattr(args, "cost_regression", None),
    )


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
