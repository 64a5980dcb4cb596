"""A run's scenarios counted as every report shows them: passed, failed, errored, skipped and
quarantined (:class:`Tally`), and the pass rate over the scenarios that count."""

from __future__ import annotations

from dataclasses import dataclass

from lkeval.results.model import RunResults, ScenarioResult


@dataclass(frozen=True)
class Tally:
    """Scenario counts as every report shows them.

    A quarantined scenario counts only as ``quarantined`` (whatever its status) so that the
    passed/failed/errored numbers are exactly the ones the gate looked at.
    """

    total: int
    passed: int
    failed: int
    errored: int
    skipped: int
    quarantined: int

    @property
    def counted(self) -> int:
        """Scenarios that count toward the pass rate (not skipped, not quarantined)."""
        return self.passed + self.failed + self.errored

    @property
    def pass_rate(self) -> float | None:
        """Passed over counted scenarios (None when none counted)."""
        return self.passed / self.counted if self.counted else None


def tally(results: RunResults) -> Tally:
    """Count the scenarios of a run by the buckets reports and outputs use."""
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "quarantined": 0}
    for scenario in results.scenarios:
        counts[bucket(scenario)] += 1
    return Tally(
        total=len(results.scenarios),
        passed=counts["passed"],
        failed=counts["failed"],
        errored=counts["error"],
        skipped=counts["skipped"],
        quarantined=counts["quarantined"],
    )


def bucket(scenario: ScenarioResult) -> str:
    """passed / failed / error / skipped / quarantined: where a scenario is counted."""
    if scenario.status == "skipped":
        return "skipped"
    if scenario.quarantined:
        return "quarantined"
    return scenario.status


def format_rate(rate: float | None) -> str:
    """A pass rate as a percentage with one decimal (``n/a`` when undefined)."""
    return "n/a" if rate is None else f"{rate * 100:.1f}%"


__all__ = ["Tally", "bucket", "format_rate", "tally"]
