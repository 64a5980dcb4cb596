"""Near misses of known keys: a misspelt scenario key must not silently drop its check.

LiveKit ignores unknown scenario keys, and lk-eval warns about them; but ``instruction:`` for
``instructions:`` or ``agent_expectation:`` for ``agent_expectations:`` would run the scenario
without what the author wrote, so a near miss is an error (see
:func:`lkeval.scenarios.yaml_nodes.check_keys`).
"""

from __future__ import annotations

from collections.abc import Iterable


def near_miss(key: str, known: Iterable[str]) -> str | None:
    """The known key that ``key`` is a typo of, if any: the same once case, ``-`` and ``_``
    are ignored, or within one edit (two for keys of six letters or more)."""

    def fold(text: str) -> str:
        return text.lower().replace("-", "").replace("_", "")

    folded = fold(key)
    best: tuple[int, str] | None = None
    for name in known:
        target = fold(name)
        budget = 2 if min(len(folded), len(target)) >= 6 else 1
        distance = _edit_distance(folded, target, budget)
        if distance <= budget and (best is None or distance < best[0]):
            best = (distance, name)
    return best[1] if best else None


def _edit_distance(a: str, b: str, cap: int) -> int:
    """Optimal string alignment distance (insert, delete, substitute, swap two neighbours),
    exact up to ``cap``; anything larger is returned as ``cap + 1``."""
    if abs(len(a) - len(b)) > cap:
        return cap + 1
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                row[j] = min(row[j], previous2[j - 2] + 1)
        previous2, previous = previous, row
    return min(previous[-1], cap + 1)
