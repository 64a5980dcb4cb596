"""Two exact questions about pass rates, in the standard library (no scipy).

* :func:`fisher_less`: is a scenario's pass rate in this run significantly below its rate in
  the history? Fisher's exact test, one-sided, on the 2x2 table of passed and failed attempts
  (this run, the history): the probability, given both margins, of this run passing as few
  attempts as it did or fewer (hypergeometric lower tail), summed in exact integers.
* :func:`wilson_interval`: where a pass rate lies (the Wilson score interval), so that a
  history of 3 attempts is not read as sure as one of 300.

``tests/results/test_pass_rates.py`` checks both against published values (Fisher's tea-tasting
table; Newcombe's 1998 table of intervals) and hand-computed fractions.
"""

from __future__ import annotations

import math
from fractions import Fraction
from statistics import NormalDist


def fisher_less(passes: int, attempts: int, history_passes: int, history_attempts: int) -> float:
    """One-sided Fisher's exact p-value that ``passes`` of ``attempts`` is a lower pass rate
    than ``history_passes`` of ``history_attempts``. 1.0 when either side is empty."""
    return float(fisher_less_exact(passes, attempts, history_passes, history_attempts))


def fisher_less_exact(
    passes: int, attempts: int, history_passes: int, history_attempts: int
) -> Fraction:
    """:func:`fisher_less` as an exact fraction: P(X <= passes) for X hypergeometric, drawing
    ``attempts`` of all ``attempts + history_attempts`` of which ``passes + history_passes``
    passed."""
    for count, of in ((passes, attempts), (history_passes, history_attempts)):
        if not 0 <= count <= of:
            raise ValueError(f"{count} passes of {of} attempts")
    if attempts == 0 or history_attempts == 0:
        return Fraction(1)
    total = attempts + history_attempts
    passed = passes + history_passes
    failed = total - passed
    low = max(0, attempts - failed)
    tail = sum(
        math.comb(passed, k) * math.comb(failed, attempts - k) for k in range(low, passes + 1)
    )
    return Fraction(tail, math.comb(total, attempts))


def wilson_interval(passes: int, attempts: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of ``passes`` of ``attempts`` (two-sided, ``confidence``);
    (0, 1) when nothing was counted."""
    if attempts <= 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    rate = passes / attempts
    z2n = z * z / attempts
    centre = (rate + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(rate * (1 - rate) / attempts + z2n / (4 * attempts))
    return max(0.0, centre - half), min(1.0, centre + half)


__all__ = ["fisher_less", "fisher_less_exact", "wilson_interval"]
