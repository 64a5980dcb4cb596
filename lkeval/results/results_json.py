"""The results file as lk-eval writes it: the result model plus the figures the reports show.

Each scenario keeps its raw per-turn metrics (``attempts[].turns``): the gate, the baseline diff
and a later ``lkeval report`` recompute everything from them. Beside them the file carries the
figures every report shows (turn latency and TTFT as p50/p95/max, tool time, turns, cost), per
scenario and for the suite, so a dashboard or a script reads them instead of re-implementing
nearest-rank percentiles and pricing. They are derived data: :func:`~lkeval.results.model.
load_results` ignores them, so a hand-edited figure changes no verdict. ``docs/results.md``
describes the file.
"""

from __future__ import annotations

import json
from typing import Any

from lkeval.results.history import HistoryRate, digests, rate_of, scenario_entry
from lkeval.results.metrics import Metrics, Spread, scenario_metrics, suite_metrics
from lkeval.results.model import RunResults, results_to_dict


def figures(metrics: Metrics) -> dict[str, Any]:
    """The JSON form of what a report shows for ``metrics`` (None where nothing was measured)."""
    return {
        "turns": metrics.turns,
        "latency_ms": _spread(metrics.latency),
        "ttft_ms": _spread(metrics.ttft),
        "tool_ms": _spread(metrics.tools),
        "cost_usd": metrics.cost_usd,
        "unpriced": list(metrics.unpriced),
    }


def _spread(value: Spread | None) -> dict[str, float] | None:
    if value is None:
        return None
    return {"p50": value.p50, "p95": value.p95, "max": value.max, "n": value.n}


def history_figures(rate: HistoryRate | None) -> dict[str, Any] | None:
    """A scenario's pass rate over the history the run was compared with (None without
    enough of it)."""
    if rate is None:
        return None
    return {
        "passes": rate.passes,
        "attempts": rate.attempts,
        "runs": rate.runs,
        "rate": round(rate.rate, 6),
        "wilson_95": [round(rate.low, 6), round(rate.high, 6)],
        "state": rate.state,
    }


def results_document(results: RunResults) -> dict[str, Any]:
    """The JSON-ready results file: the model, with ``figures`` for the suite and each scenario
    (placed before the attempts, so a reader sees them first)."""
    data = results_to_dict(results)
    history = data.pop("history")
    now = digests(results)
    scenarios = []
    for result, raw in zip(results.scenarios, data.pop("scenarios"), strict=True):
        attempts = raw.pop("attempts")
        entry = scenario_entry(results.history, result.scenario_id, now.get(result.scenario_id))
        scenarios.append(
            {
                **raw,
                "figures": figures(scenario_metrics(result)),
                "history_rate": history_figures(rate_of(entry)),
                "attempts": attempts,
            }
        )
    return {
        **data,
        "figures": figures(suite_metrics(results)),
        "scenarios": scenarios,
        "history": history,
    }


def dump_results(results: RunResults) -> str:
    """Serialise results as pretty JSON (stable key order, UTF-8 kept readable)."""
    return json.dumps(results_document(results), indent=2, ensure_ascii=False) + "\n"


__all__ = ["dump_results", "figures", "results_document"]
