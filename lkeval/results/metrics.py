"""Latency and cost of a scenario and of a run, from the per-turn metrics the attempts kept,
and the budgets they are held to.

Percentiles are nearest-rank over every turn that was answered (all attempts of a scenario
pooled; all scenarios of a run pooled for the suite), so p95 of three turns is their maximum:
with few turns a percentile is only as good as its sample, which is why the baseline diff
refuses to flag latency of scenarios with fewer than :data:`MIN_TURNS` turns.

Budgets: each miss is its own reason in the gate, the outputs and annotations. Absolute budgets
(``--max-latency``, a scenario's ``latency:``, ``--max-cost``) are checked here
(:func:`check_budgets`); regression budgets against the baseline (``--latency-regression``,
``--cost-regression``) by the comparison that measures them
(:func:`lkeval.results.regression_budgets.regression_misses`). Two rules keep them honest. A
budget that cannot be checked is a miss, not a pass: a ``ttft_p95`` budget on an agent that
reports no TTFT, or a cost budget when some model is unpriced (a partial sum would pass a run
that may be over).
And latency regressions follow the baseline diff's noise rule: a delta with too few turns or
inside the run's own spread is shown but never flagged. A latency result measured with the
agent's LiveKit Inference calls pinned to the low class (a text simulation,
``--inference-class low``) says so in its text, wherever it is shown.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from lkeval.results.model import (
    RunMetadata,
    RunResults,
    ScenarioResult,
    TurnMetrics,
    Usage,
    sum_usage,
)
from lkeval.results.pricing import format_cost, total_cost

#: Below this many turns on either side, a latency delta is shown but never flagged.
MIN_TURNS = 5


@dataclass(frozen=True)
class Spread:
    """p50 / p95 / max of one metric over ``n`` turns (milliseconds)."""

    p50: float
    p95: float
    max: float
    n: int


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def spread(values: Iterable[float | None]) -> Spread | None:
    """The spread of the values that are present (None when there are none)."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    return Spread(percentile(present, 50), percentile(present, 95), max(present), len(present))


@dataclass(frozen=True)
class Metrics:
    """What a scenario (or a whole run) cost in time and money."""

    turns: int = 0
    latency: Spread | None = None  # lk-eval's wall time per turn (latency_ms)
    ttft: Spread | None = None  # the agent's llm_ttft_ms
    # audio turns: caller stopped speaking -> agent's first audio (wire), the agent's own
    # e2e_latency beside it
    first_audio: Spread | None = None
    e2e: Spread | None = None
    tools: Spread | None = None  # tool execution times
    usage: dict[str, Usage] = field(default_factory=dict)
    cost_usd: float | None = None
    unpriced: tuple[str, ...] = ()


def turn_metrics(scenario: ScenarioResult) -> list[TurnMetrics]:
    """Every answered turn of every attempt of ``scenario`` that the agent played live.

    A replayed turn (its agent's calls came from a cassette) measured lk-eval's replay, not the
    agent's models: it stays in the attempt's record but is never pooled, so no latency
    figure, budget or baseline comparison sees it (docs/replay.md)."""
    return [turn for attempt in scenario.attempts for turn in attempt.turns if not turn.replayed]


def summarize(turns: Sequence[TurnMetrics], usage: dict[str, Usage]) -> Metrics:
    """Metrics over ``turns`` with ``usage`` (per party) priced."""
    cost, unpriced = total_cost(usage)
    return Metrics(
        turns=len(turns),
        latency=spread(t.latency_ms for t in turns),
        ttft=spread(t.llm_ttft_ms for t in turns),
        first_audio=spread(t.first_audio_ms for t in turns),
        e2e=spread(t.e2e_latency_ms for t in turns if t.mode == "audio"),
        tools=spread(ms for t in turns for ms in t.tool_ms),
        usage=usage,
        cost_usd=cost,
        unpriced=unpriced,
    )


def scenario_metrics(scenario: ScenarioResult) -> Metrics:
    """Latency over all attempts' turns, tokens and cost per party."""
    return summarize(turn_metrics(scenario), scenario.usage)


def suite_metrics(results: RunResults) -> Metrics:
    """Latency pooled over every turn of the run; tokens and cost summed."""
    turns = [t for s in results.scenarios for t in turn_metrics(s)]
    return summarize(turns, sum_usage(s.usage for s in results.scenarios))


#: Said with every latency budget result measured at the low class (``--inference-class``).
LOW_CLASS_NOTE = "measured at LiveKit Inference's low class"


def measured_at_low_class(metadata: RunMetadata) -> bool:
    """Whether some of the run's LiveKit Inference calls were pinned to the low class."""
    return metadata.inference_class in ("low", "mixed")


def latency_conditions(metadata: RunMetadata) -> str:
    """Under which conditions the run's latency was measured ("" when a results file predates
    recording them): text mode, and the LiveKit Inference class of the agent's calls.

    Since livekit-agents 1.6.10 a text simulation pins those calls to the low class, which
    production does not use; ``--inference-class agent`` measures at the agent's own class.
    """
    parts = [f"{metadata.conversation_mode} mode"] if metadata.conversation_mode else []
    if metadata.speech:
        parts.append(metadata.speech)
    if metadata.max_load is not None:
        parts.append(load_text(metadata))
    if metadata.inference_class == "low":
        parts.append(
            "LiveKit Inference calls at the low class, as livekit-agents pins text simulations "
            "(--inference-class agent measures the class the agent asks for)"
        )
    elif metadata.inference_class == "mixed":
        parts.append("LiveKit Inference calls at the low class in some scenarios")
    elif metadata.inference_class == "agent":
        parts.append("LiveKit Inference calls at the class the agent asks for")
    return "; ".join(parts)


#: Said with every latency budget result of audio turns timed on an overloaded machine.
OVERLOADED_NOTE = "timed while the machine's load exceeded its cores"


def overloaded(metadata: RunMetadata) -> bool:
    """Whether some audio turn was timed while the load average exceeded the cores."""
    return (
        metadata.max_load is not None and metadata.cores > 0 and metadata.max_load > metadata.cores
    )


def load_text(metadata: RunMetadata) -> str:
    """``load up to 3.1 on 2 cores, concurrency 2`` (and that it was too much, when it was)."""
    text = f"load up to {metadata.max_load:g} on {metadata.cores} cores"
    if metadata.concurrency:
        text += f", concurrency {metadata.concurrency}"
    return text + (f": {OVERLOADED_NOTE}" if overloaded(metadata) else "")


def format_ms(ms: float | None) -> str:
    """``840 ms`` below a second, ``1.31 s`` above; ``–`` when unknown."""
    if ms is None:
        return "–"
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def format_spread(value: Spread | None) -> str:
    """``p50 420 ms · p95 1.31 s · max 1.50 s`` (``–`` when there were no turns)."""
    if value is None:
        return "–"
    return f"p50 {format_ms(value.p50)} · p95 {format_ms(value.p95)} · max {format_ms(value.max)}"


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
    results: RunResults, budgets: Budgets | None, regressions: Sequence[BudgetMiss] = ()
) -> tuple[BudgetMiss, ...]:
    """Every budget miss of the run: suite ones first, then per scenario in run order, then
    the ``regressions`` the baseline comparison found (:func:`~lkeval.results.
    regression_budgets.regression_misses`); a latency miss measured at the low class says so."""
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
            misses.append(scenario_miss("latency", f"{scenario.label}: {text}", scenario))
    misses += regressions
    if measured_at_low_class(results.metadata):
        misses = [_noted(m) if m.kind.startswith("latency") else m for m in misses]
    if overloaded(results.metadata):
        misses = [_noted(m, OVERLOADED_NOTE) if m.kind.startswith("latency") else m for m in misses]
    return tuple(misses)


def _noted(miss: BudgetMiss, note: str = LOW_CLASS_NOTE) -> BudgetMiss:
    return dataclasses.replace(miss, text=f"{miss.text} ({note})")


def _latency_misses(metrics: Metrics, budget: dict[str, float]) -> list[str]:
    if metrics.turns == 0:
        return []
    found = []
    for stat, limit in budget.items():
        source, _, which = stat.rpartition("_")
        values, name, missing = {
            "ttft": (metrics.ttft, "TTFT", "the agent reported no TTFT"),
            "first_audio": (metrics.first_audio, "first audio", "no audio turn heard the agent"),
        }.get(source, (metrics.latency, "turn latency", ""))
        if values is None:
            found.append(f"{name} {which} budget {format_ms(limit)} cannot be checked: {missing}")
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


def scenario_miss(kind: BudgetKind, text: str, scenario: ScenarioResult) -> BudgetMiss:
    """A miss of one scenario, with where it is written (for its annotation)."""
    return BudgetMiss(
        kind, text, scenario.scenario_id, scenario.label, scenario.file, scenario.line
    )
