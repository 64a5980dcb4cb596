"""Which scenarios run: tags and globs, and splitting across CI machines (``--shard I/N``).

Shards are deterministic and stable: scenarios are ordered by their id (stable across runs:
the written id, else group name + label), then dealt round-robin, so shards differ in size by
at most one and the same scenario lands in the same shard on every machine of the matrix.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

from lkeval.errors import NothingToRunError, UsageError
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


def shard_text(shard: tuple[int, int] | None) -> str | None:
    """``(2, 4)`` → ``"2/4"`` (as ``--shard`` is written and the results record it), or None."""
    return f"{shard[0]}/{shard[1]}" if shard else None


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
        if not self._tagged(scenario):
            return False
        return not self.patterns or any(_matches(p, scenario) for p in self.patterns)

    def pick(self, scenarios: Sequence[Scenario]) -> list[Scenario]:
        """The scenarios that run, in their order: the one place a run, its attempt cap, and a
        fork's PR without secrets decide it."""
        return [s for s in scenarios if self.selects(s)]

    @property
    def not_selected(self) -> str:
        """The reason every unselected scenario is reported skipped with, whichever path
        reports it (the engine, an empty shard, a fork's PR without secrets)."""
        return f"not selected ({self.describe()})"

    def _tagged(self, scenario: Scenario) -> bool:
        return all(scenario.tags.get(k) == v for k, v in self.tags)

    def unmatched(self, scenarios: Sequence[Scenario]) -> list[str]:
        """The ``--match`` patterns that select no scenario of ``scenarios`` (given the tag
        selectors): with several patterns, a typo in one would quietly run fewer scenarios."""
        tagged = [s for s in scenarios if self._tagged(s)]
        return [p for p in self.patterns if not any(_matches(p, s) for s in tagged)]


def _matches(pattern: str, scenario: Scenario) -> bool:
    return any(
        fnmatch.fnmatchcase(text.lower(), pattern.lower()) for text in (scenario.id, scenario.label)
    )


def check_selection(scenarios: Sequence[Scenario], selection: Selection) -> None:
    """Refuse a selection of the whole suite (before any shard split) that cannot be meant.

    A ``--match`` pattern that matches nothing is a usage error naming it (exit 2); a suite,
    or a selection, that leaves no scenario at all is :class:`NothingToRunError` (exit 3): a
    gate that passes on nothing would hide an empty file or a typo in ``--tag``.
    """
    unmatched = selection.unmatched(scenarios)
    if unmatched:
        names = ", ".join(repr(p) for p in unmatched)
        among = f" with {', '.join(f'tag {k}={v}' for k, v in selection.tags)}"
        raise UsageError(
            f"--match {names} matches no scenario's id or label"
            f"{among if selection.tags else ''} (of {len(scenarios)} in the suite)"
        )
    if not scenarios:
        raise NothingToRunError("nothing to run: the scenario file(s) hold no scenario")
    if not any(selection.selects(s) for s in scenarios):
        raise NothingToRunError(
            f"nothing to run: no scenario of {len(scenarios)} is selected ({selection.describe()})"
        )
