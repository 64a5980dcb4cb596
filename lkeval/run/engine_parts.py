"""What the engine is handed: the attempts it runs (:func:`attempt_factory` makes the real
ones; tests hand in fakes), whom it tells of progress, and how it asks the judge again."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Protocol

from lkeval.results.controls import PairedVotes
from lkeval.results.model import Attempt, ScenarioResult
from lkeval.run.attempt import Evaluator, RunSettings, ScenarioAttempt, Slot
from lkeval.scenarios.model import Scenario


class ProgressObserver(Protocol):
    """Told when scenarios start and finish (terminal lines, ``::group::`` blocks)."""

    def scenario_started(self, scenario_id: str, label: str) -> None:
        """A scenario's first attempt is starting."""

    def scenario_finished(self, result: ScenarioResult) -> None:
        """A scenario has its result."""


class AttemptRunner(Protocol):
    """One attempt of one scenario: ``await run(slot)`` gives its :class:`Attempt`.

    ``interrupted`` holds what an attempt cut short by cancellation saw (or None), so an
    interrupted run still reports it; ``agent_cause`` the agent-side error it ended on (or
    None), which the error brake (``--max-errors``) counts.
    """

    interrupted: Attempt | None
    agent_cause: str | None
    # Called with ``agent_cause`` as soon as the attempt is decided (before its slot is given
    # back); a runner that never calls it has ``agent_cause`` read after ``run``.
    on_decided: Callable[[str | None], None] | None

    async def run(self, slot: Slot | None = None) -> Attempt:
        """Run the attempt (boot when the slot allows, converse, judge)."""
        ...


AttemptFactory = Callable[[Scenario, int], AttemptRunner]
"""``(scenario, attempt number from 1)`` → the attempt to run."""

AskAgain = Callable[[Scenario, Attempt], Awaitable[Attempt]]
"""Ask the judge once more about an attempt's transcript: the attempt with one more vote."""

CheckControl = Callable[[Scenario, Attempt], Awaitable["tuple[Attempt, PairedVotes] | None"]]
"""Ask the judge about a passing attempt's paired known-bad control (:mod:`lkeval.run.control`):
the attempt (its usage counting the calls) and the answers; None when no control can be built."""


def attempt_factory(
    settings: RunSettings, evaluator: Evaluator | None, run_id: str | None = None
) -> AttemptFactory:
    """Real attempts: an agent process per attempt, played and judged (one run id for all)."""
    run = run_id or f"lkeval-{uuid.uuid4().hex[:12]}"
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    settings.work_dir.mkdir(parents=True, exist_ok=True)

    def make(scenario: Scenario, attempt_no: int) -> AttemptRunner:
        return ScenarioAttempt(scenario, settings, evaluator, run, attempt_no)

    return make


__all__ = [
    "AskAgain",
    "AttemptFactory",
    "AttemptRunner",
    "CheckControl",
    "ProgressObserver",
    "attempt_factory",
]
