"""A figure before (the baseline) and after (this run): the suite's and each scenario's p95
turn latency and cost, with the noise rule that keeps a chance change from being flagged."""

from __future__ import annotations

from dataclasses import dataclass

from lkeval.results.metrics import MIN_TURNS, Metrics


@dataclass(frozen=True)
class MetricDelta:
    """One figure before (baseline) and after (this run).

    ``noisy`` marks a latency delta that is shown but never flagged: fewer than
    :data:`~lkeval.results.metrics.MIN_TURNS` turns on either side, or a change no larger than
    this run's own spread (p95 - p50), which the next run could undo by chance.
    """

    before: float | None = None
    after: float | None = None
    noisy: bool = False

    @property
    def percent(self) -> float | None:
        """The change in percent of ``before`` (None when either side is unknown or 0)."""
        if self.before is None or self.after is None or self.before == 0:
            return None
        return (self.after - self.before) / self.before * 100


def latency_delta(now: Metrics, before: Metrics) -> MetricDelta:
    """p95 turn latency before and after, with the noise rule applied."""
    if now.latency is None or before.latency is None:
        return MetricDelta(
            before.latency.p95 if before.latency else None,
            now.latency.p95 if now.latency else None,
            noisy=True,
        )
    few = min(now.latency.n, before.latency.n) < MIN_TURNS
    spread = now.latency.p95 - now.latency.p50
    within = abs(now.latency.p95 - before.latency.p95) <= spread
    return MetricDelta(before.latency.p95, now.latency.p95, noisy=few or within)


def cost_delta(now: Metrics, before: Metrics) -> MetricDelta:
    """Cost before and after; unknown (None) on a side with unpriced tokens."""
    return MetricDelta(
        None if before.unpriced else before.cost_usd,
        None if now.unpriced else now.cost_usd,
    )


__all__ = ["MetricDelta", "cost_delta", "latency_delta"]
