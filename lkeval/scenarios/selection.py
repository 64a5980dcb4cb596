"""Splitting a suite across CI machines: ``--shard I/N``.

Deterministic and stable: scenarios are ordered by their id (stable across runs: the written
id, else group name + label), then dealt round-robin, so shards differ in size by at most one
and the same scenario lands in the same shard on every machine of the matrix.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from lkeval.scenarios.model import Scenario


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` → (2, 4); 1-based, as CI matrices usually count."""
    index, sep, total = text.partition("/")
    try:
        i, n = int(index), int(total)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected I/N like 1/4, got {text!r}") from None
    if not sep or n < 1 or not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"expected I/N with 1 <= I <= N, got {text!r}")
    return i, n


def select_shard(scenarios: Sequence[Scenario], index: int, total: int) -> list[Scenario]:
    """The scenarios of shard ``index`` of ``total``, in their file order."""
    ordered = sorted(scenarios, key=lambda s: s.id)
    mine = {s.id for k, s in enumerate(ordered) if k % total == index - 1}
    return [s for s in scenarios if s.id in mine]
