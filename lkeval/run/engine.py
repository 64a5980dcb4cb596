"""The engine: runs the selected scenarios, N attempts at once, into scenario results.

It receives its collaborators (an attempt factory, a progress observer, options) and knows
nothing of agents, LLMs, the CLI, the files scenarios came from or the reports that follow:
repeat/min-pass aggregation, quarantine and ordering are unit-tested with fake attempts
(``tests/run/test_engine.py``); :func:`attempt_factory` makes the real ones. Results come back in
scenario order whatever the concurrency, and an interrupted run still returns every attempt
that finished.
"""

from __future__ import annotations

import asyncio
from collections.abc import (
    Collection,
    Coroutine,
    Sequence,
)
from dataclasses import replace
from typing import Any

from lkeval import defaults
from lkeval.results.calibration import JUDGE_UNFIT, WEAK_JUDGE_ALLOWED
from lkeval.results.model import Attempt, Sampling, ScenarioResult, Status
from lkeval.results.sampling import (
    Observation,
    describe,
    describe_fixed,
    judge_passed,
    observe,
)
from lkeval.run.attempt import (
    NOT_RUN_INTERRUPTED,
)
from lkeval.run.engine_options import (
    RUN_ATTEMPTS_PER_SCENARIO,
    EngineOptions,
    attempts_problem,
    run_attempt_cap,
)
from lkeval.run.engine_parts import (
    AskAgain,
    AttemptFactory,
    AttemptRunner,
    CheckControl,
    ProgressObserver,
    attempt_factory,
)
from lkeval.run.slots import Admission, AgentSlots
from lkeval.run.systemic import ErrorBrake, recurring_failure
from lkeval.scenarios.model import Scenario

NOT_SAMPLED = "the same failure at boot in every attempt, not sampled as noise"


class Engine:
    """Runs scenarios; construct with collaborators, then ``await run(scenarios)``."""

    def __init__(
        self,
        make_attempt: AttemptFactory,
        progress: ProgressObserver,
        options: EngineOptions,
        ask_again: AskAgain | None = None,
        admission: Admission | None = None,
        check_control: CheckControl | None = None,
    ) -> None:
        self.make_attempt = make_attempt
        self.admission = admission
        self.progress = progress
        self.options = options
        self._attempts: dict[str, list[Attempt | None]] = {}
        self._started: set[str] = set()
        self._results: dict[str, ScenarioResult] = {}
        self._scenarios: list[Scenario] = []
        self._brake = ErrorBrake(options.max_errors)
        self.ask_again = ask_again
        self.check_control = check_control
        self._budget = 0

    def plan(self, scenario: Scenario) -> tuple[int, int]:
        """(repeat, min_pass) for a scenario: its own settings, else the run's, else 1."""
        repeat, min_pass = scenario.runs(self.options.repeat, self.options.min_pass)
        return repeat, min(min_pass, repeat)

    def is_quarantined(self, scenario: Scenario) -> bool:
        """Whether ``scenario`` carries a ``--quarantine`` tag (reported, never blocking)."""
        return any(scenario.tags.get(k) == v for k, v in self.options.quarantine)

    async def run(self, scenarios: Sequence[Scenario]) -> list[ScenarioResult]:
        """Run everything selected; unselected scenarios come back as skipped."""
        self._scenarios = list(scenarios)
        selected = self.options.selection.pick(scenarios)
        runnable = [s for s in selected if s.id not in self.options.nothing_to_check]
        self._budget = run_attempt_cap(scenarios, self.options) - sum(
            self.plan(s)[0] for s in runnable if self.options.fixed(s)
        )
        concurrency = max(1, self.options.concurrency)
        slots = AgentSlots(
            concurrency,
            defaults.prepared_agents(concurrency),
            defaults.booting_agents(concurrency, warm=self.options.warm_starts),
            admission=self.admission,
        )
        jobs: list[Coroutine[Any, Any, None]] = []
        for scenario in self._to_play(scenarios):
            if self.options.fixed(scenario):
                jobs.append(self._fixed(scenario, slots))
            else:
                jobs.append(self._sequential(scenario, slots))
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

    def not_run(self, scenarios: Sequence[Scenario]) -> list[ScenarioResult]:
        """The results of a run stopped before its first attempt (a signal while the judge or
        the fork server was being readied): skipped as :meth:`run` would skip them, the rest
        "not run (interrupted)"."""
        self._scenarios = list(scenarios)
        self._to_play(scenarios)
        return self.results(interrupted=True)

    def _to_play(self, scenarios: Sequence[Scenario]) -> list[Scenario]:
        """The scenarios to play; the others get their skipped result now."""
        to_play = []
        for scenario in scenarios:
            if not self.options.selection.selects(scenario):
                # Reported skipped, but silently: the run prints one line for all of them,
                # and the progress counts only what runs (no [100/100] for a 1-scenario run).
                reason = self.options.selection.not_selected
                self._results[scenario.id] = self._skipped(scenario, reason)
                continue
            if scenario.id in self.options.nothing_to_check:
                reason = self.options.nothing_to_check[scenario.id]
                self._complete(scenario, self._skipped(scenario, reason))
                continue
            self._attempts[scenario.id] = []
            to_play.append(scenario)
        return to_play

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
                    # Before the attempt gives back its slot: the next boot sees a trip. Only
                    # a scenario's first attempt counts: the brake is about the first N
                    # scenarios, and one broken scenario's extra attempts must not trip it.
                    told.append(cause)
                    if attempt_no == 1:
                        self._brake.record(cause)

                runner.on_decided = decided
                try:
                    attempt = await runner.run(slot)
                except asyncio.CancelledError:
                    if runner.interrupted is not None:  # kept for results(interrupted=True)
                        self._attempts[scenario.id][attempt_no - 1] = runner.interrupted
                    raise
                if not told and attempt_no == 1:  # a runner that does not tell early
                    self._brake.record(runner.agent_cause)
        self._attempts[scenario.id][attempt_no - 1] = attempt

    async def _start(self, scenario: Scenario, count: int, slots: AgentSlots) -> range:
        """Run ``count`` more attempts of ``scenario`` at once; their numbers.

        Once the attempts that finished all failed at boot the same way
        (:func:`~lkeval.run.systemic.recurring_failure`), the others are stopped and dropped:
        they would fail the same way, and the scenario ends on the one that did."""
        attempts = self._attempts[scenario.id]
        numbers = range(len(attempts) + 1, len(attempts) + count + 1)
        attempts.extend([None] * count)
        tasks = {n: asyncio.ensure_future(self._attempt(scenario, n, slots)) for n in numbers}
        pending = set(tasks.values())
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()
                if pending and self._recurring(scenario) is not None:
                    await _cancelled(pending)
                    for n, task in tasks.items():
                        if task in pending:
                            attempts[n - 1] = None
                    self._budget += len(pending)
                    pending = set()
        except BaseException:
            await _cancelled(set(tasks.values()))
            raise
        return numbers

    def _recurring(self, scenario: Scenario) -> str | None:
        """The boot failure every finished attempt of ``scenario`` ended on, if one recurs."""
        return recurring_failure([a for a in self._attempts[scenario.id] if a is not None])

    def _not_sampled(self, scenario: Scenario, mode: str) -> ScenarioResult | None:
        """The scenario's result when a failure at boot recurs: an ``error`` after the
        attempts it took, worded as what it is, not as a sampled pass rate (None otherwise)."""
        reason = self._recurring(scenario)
        if reason is None:
            return None
        done = [a for a in self._attempts[scenario.id] if a is not None]
        ran = sum(1 for a in done if a.status != "skipped")
        text = (
            f"stopped after {ran} attempt(s): the agent failed at boot with an error that "
            "recurs, so no further attempt was sampled"
        )
        sampling = Sampling(mode, "failed", 0, ran, text=text)
        reason = f"{NOT_SAMPLED}: {reason}"
        return self._scenario_result(scenario, "error", reason, done, None, sampling)

    async def _fixed(self, scenario: Scenario, slots: AgentSlots) -> None:
        repeat, _ = self.plan(scenario)
        await self._start(scenario, repeat, slots)
        done = [a for a in self._attempts[scenario.id] if a is not None]
        stopped = self._not_sampled(scenario, "fixed")
        result = stopped or await self._vouched(scenario, self._combine(scenario, done))
        self._complete(scenario, result)

    async def _sequential(self, scenario: Scenario, slots: AgentSlots) -> None:
        """Attempts while the verdict is uncertain: each round starts as many as the rule will
        certainly run, then reads them in attempt order (asking the judge again where the rule
        wants it), so the decision does not depend on which attempt finished first."""
        rule = self.options.rule_for(scenario)
        seen: list[Observation] = []
        why_undecided = ""
        while (wanted := rule.attempts_at_least(seen)) and not why_undecided:
            count = min(wanted, self._budget)
            if count <= 0:
                why_undecided = (
                    f"the run's cap of {run_attempt_cap(self._scenarios, self.options)} attempts "
                    "(--max-run-attempts) was reached"
                )
                break
            self._budget -= count
            numbers = await self._start(scenario, count, slots)
            stopped = self._not_sampled(scenario, "sequential")
            if stopped is not None:
                self._complete(scenario, stopped)
                return
            self._budget += self._replayed(scenario, numbers)
            for n in numbers:
                obs = await self._observe(scenario, n, seen)
                if obs is None:
                    attempt = self._attempts[scenario.id][n - 1]
                    why_undecided = attempt.reason if attempt else "not run"
                    break
                seen.append(obs)
        done = [a for a in self._attempts[scenario.id] if a is not None]
        result = self._decide(scenario, done, seen, why_undecided)
        self._complete(scenario, await self._vouched(scenario, result))

    async def _vouched(self, scenario: Scenario, result: ScenarioResult) -> ScenarioResult:
        """A pass the conversation judge gave, kept only if the judge can vouch for it: its
        calibration does not say it cannot tell (unless ``--allow-weak-judge``), and it fails
        the paired known-bad control of the passing transcript (:mod:`lkeval.run.control`)."""
        judged = [a for a in result.attempts if a.status == "passed" and judge_passed(a)]
        if result.status != "passed" or not judged:
            return result
        unfit = self.options.unfit_judges.get(scenario.id)
        if unfit is not None and unfit[0] == scenario.digest:
            if not self.options.allow_weak_judge:
                why = f"{JUDGE_UNFIT} {unfit[1]}: its passes cannot pass the gate"
                return replace(result, status="error", reason=f"{why} (--allow-weak-judge)")
            result = replace(result, reason=f"{WEAK_JUDGE_ALLOWED} {unfit[1]}")
        if self.check_control is None:
            return result
        checked = await self.check_control(scenario, judged[0])
        if checked is None:
            return result
        attempt, votes = checked
        attempts = [attempt if a is judged[0] else a for a in result.attempts]
        self._attempts[scenario.id] = list(attempts)
        result = replace(result, attempts=tuple(attempts))
        if attempt.status != "passed" or not votes.passes or votes.passed_it:
            why = votes.text() if votes.passes else "no answer on a known-bad version of it"
            why = attempt.reason if attempt.status != "passed" else why
            return replace(result, status="error", reason=f"{JUDGE_UNFIT} {why}")
        if result.sampling is not None:
            text = f"{result.sampling.text}; {votes.text()}"
            result = replace(result, sampling=replace(result.sampling, text=text))
        return result

    def _replayed(self, scenario: Scenario, numbers: range) -> int:
        """How many of these attempts replayed in full from cassettes (``--cassettes``): they
        cost no LLM call, so they give their place in the run's cap back. A replayed scenario
        then repeats its recorded run's attempts and decision exactly, whatever the scenarios
        that went live take (only those are sampled further at a cost)."""
        attempts = self._attempts[scenario.id]
        return sum(
            1
            for n in numbers
            if (attempt := attempts[n - 1]) is not None
            and attempt.replay is not None
            and attempt.replay.fully_replayed
        )

    async def _observe(
        self, scenario: Scenario, attempt_no: int, seen: list[Observation]
    ) -> Observation | None:
        """Attempt ``attempt_no``'s observation, after asking the judge again as long as the
        rule wants another vote on it (None when the attempt did not run)."""
        rule = self.options.rule_for(scenario)
        attempts = self._attempts[scenario.id]
        attempt = attempts[attempt_no - 1]
        obs = observe(attempt) if attempt is not None else None
        before = rule.evidence(seen)
        while (
            obs is not None
            and attempt is not None
            and self.ask_again is not None
            and rule.wants_vote(before, obs)
        ):
            again = await self.ask_again(scenario, attempt)
            again_obs = observe(again)
            if again_obs is None or again_obs.votes <= obs.votes:
                break  # the judge could not be asked again: the votes so far stand
            attempt, obs = again, again_obs
            attempts[attempt_no - 1] = attempt
        return obs

    def _decide(
        self,
        scenario: Scenario,
        attempts: list[Attempt],
        seen: list[Observation],
        why_undecided: str,
    ) -> ScenarioResult:
        """The sequential decision as a scenario result (an undecided one never passes)."""
        sampling = describe(self.options.rule_for(scenario), seen)
        ran = [a for a in attempts if a.status != "skipped"]
        status: Status
        if not ran:
            status, reason = "skipped", attempts[0].reason if attempts else why_undecided
        elif sampling.outcome == "passed":
            status, reason = "passed", ""
        elif sampling.outcome == "failed":
            failures = [a for a in ran if a.status == "failed"]
            status = "failed" if failures else "error"
            first = (failures or [a for a in ran if a.status == "error"] or ran)[0]
            reason = first.reason  # the reports put the decision (sampling.text) before it
        else:
            status = "error"
            reason = f"undecided after {sampling.passes} of {len(ran)} passed: {why_undecided}"
        return self._scenario_result(scenario, status, reason, attempts, 1, sampling)

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
        sampling = describe_fixed(passes, len(ran), *self.plan(scenario)) if ran else None
        return self._scenario_result(scenario, status, reason, attempts, min_pass, sampling)

    def _skipped(self, scenario: Scenario, reason: str) -> ScenarioResult:
        return self._scenario_result(scenario, "skipped", reason, [])

    def _scenario_result(
        self,
        scenario: Scenario,
        status: Status,
        reason: str,
        attempts: list[Attempt],
        min_pass: int | None = None,
        sampling: Sampling | None = None,
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
            sampling=sampling,
        )


async def _cancelled(tasks: Collection[asyncio.Future[None]]) -> None:
    """Cancel ``tasks`` and wait until each has unwound (its agent stopped)."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


__all__ = [
    "NOT_SAMPLED",
    "RUN_ATTEMPTS_PER_SCENARIO",
    "Admission",
    "AgentSlots",
    "AskAgain",
    "AttemptFactory",
    "AttemptRunner",
    "CheckControl",
    "Engine",
    "EngineOptions",
    "ProgressObserver",
    "attempt_factory",
    "attempts_problem",
    "run_attempt_cap",
]
