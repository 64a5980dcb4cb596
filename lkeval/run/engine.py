"""The engine: runs the selected scenarios, N attempts at once, into scenario results.

It receives its collaborators (an attempt factory, a progress observer, options) and knows
nothing of agents, LLMs, the CLI, the files scenarios came from or the reports that follow:
repeat/min-pass aggregation, quarantine and ordering are unit-tested with fake attempts
(``tests/test_engine.py``); :func:`attempt_factory` makes the real ones. Results come back in
scenario order whatever the concurrency, and an interrupted run still returns every attempt
that finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from lkeval.results.model import Attempt, ScenarioResult, Status
from lkeval.run.attempt import (
    NOT_RUN_INTERRUPTED,
    Evaluator,
    RunSettings,
    ScenarioAttempt,
    Slot,
)
from lkeval.run.systemic import DEFAULT_MAX_ERRORS, ErrorBrake
from lkeval.scenarios.model import Scenario
from lkeval.scenarios.selection import Selection


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


def default_concurrency() -> int:
    """Agents boot CPU-bound (~2.5 CPU-s each): more at once than cores only queues them."""
    return max(1, min(4, os.cpu_count() or 1))


@dataclass(frozen=True)
class EngineOptions:
    """How the suite runs."""

    concurrency: int = field(default_factory=default_concurrency)
    repeat: int | None = None
    min_pass: int | None = None
    quarantine: tuple[tuple[str, str], ...] = ()
    selection: Selection = field(default_factory=Selection)
    max_errors: int = DEFAULT_MAX_ERRORS  # 0: never stop early (lkeval.run.systemic)
    # scenario id -> why it has nothing to check; decided before anything boots, not played
    nothing_to_check: dict[str, str] = field(default_factory=dict)


class AgentSlots:
    """The run's concurrency: N conversations at once, and up to N more agents being prepared
    (or prepared and waiting to talk). Boots then overlap conversations instead of queueing
    behind them, while the number of live agents stays bounded (2N). A prepared agent has
    imported its code and started its server but not its session: that starts when
    :meth:`_SlotHandle.converse` returns, so waiting for a slot cannot change a transcript
    (no greeting, idle nudge or away timer runs before its conversation can start)."""

    def __init__(self, n: int) -> None:
        self._boot = asyncio.Semaphore(n)
        self._talk = asyncio.Semaphore(n)

    @contextlib.asynccontextmanager
    async def attempt(self) -> AsyncIterator[_SlotHandle]:
        """Hold a boot slot now; the handle trades it for a conversation slot."""
        await self._boot.acquire()
        handle = _SlotHandle(self._boot, self._talk)
        try:
            yield handle
        finally:
            handle.release()


class _SlotHandle:
    def __init__(self, boot: asyncio.Semaphore, talk: asyncio.Semaphore) -> None:
        self._boot: asyncio.Semaphore | None = boot
        self._talk_sem = talk
        self._talk: asyncio.Semaphore | None = None

    async def converse(self) -> None:
        """Trade the boot slot for a conversation slot (waits while N agents talk)."""
        if self._talk is None and self._boot is not None:
            await self._talk_sem.acquire()
            self._talk = self._talk_sem
            self._boot.release()
            self._boot = None

    def release(self) -> None:
        for sem in (self._boot, self._talk):
            if sem is not None:
                sem.release()
        self._boot = self._talk = None


class Engine:
    """Runs scenarios; construct with collaborators, then ``await run(scenarios)``."""

    def __init__(
        self, make_attempt: AttemptFactory, progress: ProgressObserver, options: EngineOptions
    ) -> None:
        self.make_attempt = make_attempt
        self.progress = progress
        self.options = options
        self._attempts: dict[str, list[Attempt | None]] = {}
        self._started: set[str] = set()
        self._results: dict[str, ScenarioResult] = {}
        self._scenarios: list[Scenario] = []
        self._brake = ErrorBrake(options.max_errors)

    def plan(self, scenario: Scenario) -> tuple[int, int]:
        """(repeat, min_pass) for a scenario: its own settings, else the run's, else 1."""
        repeat = scenario.repeat or self.options.repeat or 1
        min_pass = scenario.min_pass or self.options.min_pass or repeat
        return repeat, min(min_pass, repeat)

    def is_quarantined(self, scenario: Scenario) -> bool:
        """Whether ``scenario`` carries a ``--quarantine`` tag (reported, never blocking)."""
        return any(scenario.tags.get(k) == v for k, v in self.options.quarantine)

    async def run(self, scenarios: Sequence[Scenario]) -> list[ScenarioResult]:
        """Run everything selected; unselected scenarios come back as skipped."""
        self._scenarios = list(scenarios)
        slots = AgentSlots(max(1, self.options.concurrency))
        jobs: list[Coroutine[Any, Any, None]] = []
        for scenario in self._scenarios:
            if not self.options.selection.selects(scenario):
                # Reported skipped, but silently: the run prints one line for all of them,
                # and the progress counts only what runs (no [100/100] for a 1-scenario run).
                reason = f"not selected ({self.options.selection.describe()})"
                self._results[scenario.id] = self._skipped(scenario, reason)
                continue
            if scenario.id in self.options.nothing_to_check:
                reason = self.options.nothing_to_check[scenario.id]
                self._complete(scenario, self._skipped(scenario, reason))
                continue
            repeat, _ = self.plan(scenario)
            self._attempts[scenario.id] = [None] * repeat
            jobs.extend(self._attempt(scenario, n, slots) for n in range(1, repeat + 1))
        tasks = [asyncio.ensure_future(job) for job in jobs]
        try:
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            # gather gives up at the first cancelled job; the others are still unwinding and
            # recording what they saw (results(interrupted=True) reads it): wait for them.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return self.results()

    async def _attempt(self, scenario: Scenario, attempt_no: int, slots: AgentSlots) -> None:
        async with slots.attempt() as slot:
            if self._brake.cause is not None:  # a systemic failure: do not boot the rest
                attempt = Attempt(status="skipped", reason=self._brake.not_run_reason())
            else:
                if scenario.id not in self._started:
                    self._started.add(scenario.id)
                    self.progress.scenario_started(scenario.id, scenario.label)
                runner = self.make_attempt(scenario, attempt_no)
                told: list[str | None] = []

                def decided(cause: str | None) -> None:
                    # Before the attempt gives back its slot: the next boot sees a trip.
                    told.append(cause)
                    self._brake.record(cause)

                runner.on_decided = decided
                try:
                    attempt = await runner.run(slot)
                except asyncio.CancelledError:
                    if runner.interrupted is not None:  # kept for results(interrupted=True)
                        self._attempts[scenario.id][attempt_no - 1] = runner.interrupted
                    raise
                if not told:  # a runner that does not tell early
                    self._brake.record(runner.agent_cause)
        attempts = self._attempts[scenario.id]
        attempts[attempt_no - 1] = attempt
        if all(a is not None for a in attempts):
            self._complete(scenario, self._combine(scenario, [a for a in attempts if a]))

    def _complete(self, scenario: Scenario, result: ScenarioResult) -> None:
        self._results[scenario.id] = result
        self.progress.scenario_finished(result)

    def results(self, interrupted: bool = False) -> list[ScenarioResult]:
        """Results in scenario order; with ``interrupted``, unfinished ones say so and keep
        every attempt that finished or was cut short (with what it saw)."""
        out = []
        for scenario in self._scenarios:
            if scenario.id in self._results:
                out.append(self._results[scenario.id])
            elif interrupted:
                kept = [a for a in self._attempts.get(scenario.id, []) if a is not None]
                if all(a.reason == NOT_RUN_INTERRUPTED for a in kept):  # none had begun
                    out.append(self._skipped(scenario, NOT_RUN_INTERRUPTED))
                    continue
                finished = sum(
                    1 for a in kept if a.status != "skipped" and a.reason != "interrupted"
                )
                planned = len(self._attempts.get(scenario.id, [])) or 1
                reason = f"interrupted: {finished}/{planned} attempt(s) finished"
                out.append(self._scenario_result(scenario, "error", reason, kept))
        return out

    def _combine(self, scenario: Scenario, attempts: list[Attempt]) -> ScenarioResult:
        _, min_pass = self.plan(scenario)
        ran = [a for a in attempts if a.status != "skipped"]
        passes = sum(1 for a in ran if a.status == "passed")
        status: Status
        if not ran:
            status, reason = "skipped", attempts[0].reason if attempts else ""
        elif passes >= min_pass:
            status, reason = "passed", ""
        else:
            failures = [a for a in ran if a.status == "failed"]
            status = "failed" if failures else "error"
            first = (failures or [a for a in ran if a.status == "error"])[0]
            reason = first.reason
            if len(attempts) > 1:
                reason = f"{passes}/{len(ran)} runs passed, needs {min_pass}: {reason}"
        return self._scenario_result(scenario, status, reason, attempts, min_pass)

    def _skipped(self, scenario: Scenario, reason: str) -> ScenarioResult:
        return self._scenario_result(scenario, "skipped", reason, [])

    def _scenario_result(
        self,
        scenario: Scenario,
        status: Status,
        reason: str,
        attempts: list[Attempt],
        min_pass: int | None = None,
    ) -> ScenarioResult:
        # The attempts' own time (each from its conversation slot: see ScenarioAttempt.run),
        # never the wait for a slot: at c=32 that wait once made a 10 s conversation read 25 s
        # and JUnit times sum to 50x the run, so "slowest tests" ranked queue positions.
        return ScenarioResult.of(
            scenario,
            status,
            reason,
            attempts=tuple(attempts),
            min_pass=min_pass if min_pass is not None else self.plan(scenario)[1],
            quarantined=self.is_quarantined(scenario),
            duration_seconds=sum(a.duration_seconds for a in attempts),
            latency_budget=dict(scenario.latency),
        )
