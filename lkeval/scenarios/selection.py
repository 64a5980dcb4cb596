"""Which scenarios run: tags and globs, and splitting across CI machines (``--shard I/N``).

Shards are deterministic and stable: scenarios are ordered by their id (stable across runs:
the written id, else group name + label), then dealt round-robin, so shards differ in size by
at most one and the same scenario lands in the same shard on every machine of the matrix.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

from lkeval.scenarios.model import Scenario


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` → (2, 4); 1-based, as CI matrices usually count."""
    index, sep, total = text.partition("/")
    try:
        i, n = int(index), int(total)
    except ValueError:
        raise ValueError(f"expected I/N like 1/4, got {text!r}") from None
    if not sep or n < 1 or not 1 <= i <= n:
        raise ValueError(f"expected I/N with 1 <= I <= N, got {text!r}")
    return i, n


def select_shard(scenarios: Sequence[Scenario], index: int, total: int) -> list[Scenario]:
    """The scenarios of shard ``index`` of ``total``, in their file order."""
    ordered = sorted(scenarios, key=lambda s: s.id)
    mine = {s.id for k, s in enumerate(ordered) if k % total == index - 1}
    return [s for s in scenarios if s.id in mine]


def parse_tag_selector(text: str) -> tuple[str, str]:
    """``key=value`` → (key, value); raises ValueError with a usable message."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


@dataclass(frozen=True)
class Selection:
    """Which scenarios run. Tag selectors are ``key=value`` (all must hold); patterns are
    case-insensitive globs on id or label (any may match)."""

    tags: tuple[tuple[str, str], ...] = ()
    patterns: tuple[str, ...] = ()

    def describe(self) -> str:
        """``tag k=v, match 'glob'``: why a scenario was not selected."""
        parts = [f"tag {k}={v}" for k, v in self.tags] + [f"match {p!r}" for p in self.patterns]
        return ", ".join(parts)

    def selects(self, scenario: Scenario) -> bool:
        """Whether ``scenario`` runs."""
        if any(scenario.tags.get(k) != v for k, v in self.tags):
            return False
        if not self.patterns:
            return True
        return any(
            fnmatch.fnmatchcase(text.lower(), pattern.lower())
            for pattern in self.patterns
            for text in (scenario.id, scenario.label)
        )
