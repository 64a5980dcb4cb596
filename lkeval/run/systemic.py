"""``--max-errors``: a systemic failure ends the run in seconds, not in an hour.

A wrong LLM URL or a missing key breaks every scenario the same way. When the first attempts
of the first N scenarios to finish all failed with the same agent-side cause (a scenario's
extra attempts, repeated or sequential, do not count: one broken scenario is not systemic),
the rest are not booted: they are reported "not run (stopped early)" with that cause (like
pytest's ``--maxfail``, but only for one repeated cause, so a suite with a few unrelated broken
scenarios still runs to the end). A brake is a systemic failure: the scenarios it did not run
fail the gate, even when the ones that tripped it were quarantined.

Within one scenario, a failure at boot that recurs (:func:`recurring_failure`) ends it after
its first attempt: it is an ``error``, not a sample of a pass rate.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from lkeval.agents.failure import BOOT_FAILURE, MOCK_TOOLS_REASON
from lkeval.results.model import NOT_RUN_STOPPED, Attempt

_NUMBERS = re.compile(r"\d+")


def cause_key(reason: str) -> str:
    """What makes two failures "the same cause": the reason without its numbers (ports,
    timestamps, turn counts, exit codes differ between scenarios hit by the same fault)."""
    return _NUMBERS.sub("#", reason).strip()


class ErrorBrake:
    """Watches the first ``limit`` finished attempts; trips when they share one cause."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._first: list[str | None] = []
        self.cause: str | None = None  # the reason of the first such failure, once tripped

    def record(self, agent_cause: str | None) -> None:
        """One finished attempt: its agent-side error reason, or None (passed, failed, or an
        error that was not the agent's, such as the judge being down)."""
        if self.limit <= 0 or self.cause is not None or len(self._first) >= self.limit:
            return
        self._first.append(agent_cause)
        if len(self._first) < self.limit or any(c is None for c in self._first):
            return
        keys = {cause_key(c) for c in self._first if c is not None}
        if len(keys) == 1:
            self.cause = self._first[0]

    def not_run_reason(self) -> str:
        """Why an attempt was not booted (the gate fails on every such scenario)."""
        return (
            f"{NOT_RUN_STOPPED}: the first {self.limit} scenario(s) failed with the same "
            f"agent-side cause (--max-errors {self.limit}): {self.cause}"
        )


def recurring_failure(attempts: Sequence[Attempt]) -> str | None:
    """The reason every attempt that ran so far failed on at boot, when it is the same one
    (numbers aside): an import that fails, an entrypoint that raises, mock tools that do not
    fit the agent. Such a failure recurs in every attempt, so sampling it again measures
    nothing (None otherwise, or when no attempt ran)."""
    ran = [a for a in attempts if a.status != "skipped"]
    if not ran or any(a.status != "error" or not _at_boot(a.reason) for a in ran):
        return None
    return ran[0].reason if len({cause_key(a.reason) for a in ran}) == 1 else None


def _at_boot(reason: str) -> bool:
    return reason.startswith((BOOT_FAILURE, MOCK_TOOLS_REASON))
