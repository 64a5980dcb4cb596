"""Fisher's exact test and the Wilson interval against published and hand-computed values."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from lkeval.results.pass_rates import fisher_less, fisher_less_exact, wilson_interval


def test_fisher_reproduces_the_tea_tasting_table() -> None:
    # Fisher (1935), the lady tasting tea: 3 of 4 cups right; the one-sided p-value is 17/70
    # (0.2429, as R's fisher.test(alternative = "greater") prints). Mirrored: 1 of 4 "passes"
    # now against 3 of 4 before is as unlikely, in the lower tail.
    assert fisher_less_exact(1, 4, 3, 4) == Fraction(17, 70)
    assert fisher_less(1, 4, 3, 4) == pytest.approx(0.242857, abs=1e-6)


@pytest.mark.parametrize(
    ("now", "before", "expected"),
    [
        # hand-computed hypergeometric tails, written as the sum of C(K, k) C(F, n - k) / C(T, n)
        ((0, 3), (14, 20), Fraction(math.comb(9, 3), math.comb(23, 3))),  # 84/1771
        ((0, 2), (14, 20), Fraction(math.comb(8, 2), math.comb(22, 2))),  # 28/231
        ((1, 6), (14, 20), Fraction(math.comb(11, 6) + 15 * math.comb(11, 5), math.comb(26, 6))),
        (
            (2, 5),
            (19, 20),
            Fraction(
                math.comb(4, 5 - 2) * math.comb(21, 2) + math.comb(21, 1) * math.comb(4, 4),
                math.comb(25, 5),
            ),
        ),
    ],
)
def test_fisher_matches_hand_computed_tails(
    now: tuple[int, int], before: tuple[int, int], expected: Fraction
) -> None:
    assert fisher_less_exact(*now, *before) == expected


def test_fisher_is_one_sided_and_bounded() -> None:
    assert fisher_less(3, 3, 0, 20) == 1.0  # better than the history: nothing to see
    assert fisher_less(0, 5, 20, 20) == pytest.approx(1 / math.comb(25, 5))
    assert fisher_less(0, 0, 14, 20) == 1.0 and fisher_less(1, 2, 0, 0) == 1.0
    with pytest.raises(ValueError):
        fisher_less(4, 3, 1, 2)


@pytest.mark.parametrize(
    ("passes", "attempts", "low", "high"),
    [
        # Newcombe (1998), Statistics in Medicine 17:857, Table I, method 3 (Wilson score)
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_matches_newcombes_table(
    passes: int, attempts: int, low: float, high: float
) -> None:
    got = wilson_interval(passes, attempts)
    assert got[0] == pytest.approx(low, abs=5e-5)
    assert got[1] == pytest.approx(high, abs=5e-5)


def test_wilson_of_nothing_says_nothing() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
