"""A scenario's simulation around an ``AgentSession`` a test builds itself.

LiveKit's testing guide drives a session with ``session.run(user_input=...)`` and checks each
``RunResult``; it has no scenario, no simulated caller, no ``simulation_context()`` and no
``on_simulation_end``. This gives a test those: the scenario's ``SimulationDispatch`` on a fake
job (LiveKit's ``fake_job_context``, the job attribute the simulator sets), the agent's own
``on_simulation_end`` taken from its ``AgentServer``, lk-eval's caller, and a verdict made as
``lkeval run`` makes one (the judges on the conversation, then the agent's veto, exactly once).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import pytest

from lkeval.errors import LkevalError
from lkeval.pytest_plugin.failure import failure_text
from lkeval.pytest_plugin.settings import enabled_settings, run_options
from lkeval.pytest_plugin.transcript import session_transcript
from lkeval.results.model import Attempt, ScenarioResult, Status, TranscriptItem, Usage, Verdict
from lkeval.scenarios.model import NOTHING_TO_CHECK, Scenario

MARKER = "lkeval_scenario"
UNJUDGED = (
    f"{NOTHING_TO_CHECK}: no judge looked at this conversation (name one: --judge-model in "
    "lkeval_run_args); the agent's on_simulation_end can veto, never pass"
)
RUN_ID = "lkeval-pytest"


def _fail(message: str) -> NoReturn:
    pytest.fail(f"lk-eval: {message}", pytrace=False)


def scenario_for(request: pytest.FixtureRequest) -> Scenario:
    """The scenario the test's ``lkeval_scenario("ID")`` marker names, from the run's file."""
    from lkeval.scenarios.loader import load_or_raise

    marker = request.node.get_closest_marker(MARKER)
    if marker is None or not marker.args:
        _fail(f'mark the test @pytest.mark.{MARKER}("SCENARIO_ID") to use lk-eval\'s fixtures')
    settings = enabled_settings(request.config)
    if settings is None:
        _fail("no scenarios file: give --lkeval-scenarios FILE or the ini key lkeval_scenarios")
    try:
        groups, _ = load_or_raise([settings.scenarios])
    except LkevalError as exc:
        _fail(str(exc))
    wanted = str(marker.args[0])
    for group in groups:
        for scenario in group.scenarios:
            if scenario.id == wanted:
                return scenario
    _fail(f"{settings.scenarios}: no scenario with id {wanted!r}")


def evaluator_for(request: pytest.FixtureRequest, scenario: Scenario) -> Any:
    """lk-eval's evaluator (caller and judges) for ``scenario``, with the run's settings."""
    from lkeval.llm.evaluator import build_evaluator

    settings = enabled_settings(request.config)
    assert settings is not None  # scenario_for checked it
    try:
        evaluator = build_evaluator(run_options(settings).llm, [scenario])
        if evaluator is not None and evaluator.judge_spec is not None:
            evaluator.cache_preflight = True  # kept between runs, as lkeval dev keeps it
            evaluator.preflight(sys.stdout)  # a judge that fails its canaries judges nothing
        return evaluator
    except LkevalError as exc:
        _fail(str(exc))


def agent_server(request: pytest.FixtureRequest) -> Any:
    """The agent's ``AgentServer`` (its ``on_simulation_end``), or None without an agent."""
    from lkeval.inproc.loader import load_server

    settings = enabled_settings(request.config)
    if settings is None or settings.agent is None:
        return None
    try:
        return load_server(Path(settings.agent))
    except LkevalError as exc:
        _fail(str(exc))


class ScenarioSimulation:
    """The scenario's fake job while the test runs: ``with simulation:``, then ``verdict``."""

    def __init__(self, scenario: Scenario, server: Any, evaluator: Any) -> None:
        self.scenario = scenario
        self.server = server
        self.evaluator = evaluator
        self._job: contextlib.ExitStack | None = None
        self._verdict: ScenarioVerdict | None = None
        self.job_context: Any = None

    def __enter__(self) -> ScenarioSimulation:
        from livekit.agents.ipc.mock_room import create_mock_room
        from livekit.agents.testing import fake_job_context
        from livekit.agents.types import ATTRIBUTE_SIMULATOR_DISPATCH

        from lkeval.inproc.hooks import check_hooks
        from lkeval.run.attempt import dispatch_json

        try:  # the private names used here, checked up front as lkeval dev checks them
            check_hooks(self.server)
        except LkevalError as exc:
            _fail(str(exc))
        self._job = contextlib.ExitStack()
        # A mock room, as the console's job has: a real one needs an event loop now.
        job = self._job.enter_context(
            fake_job_context(room=create_mock_room(), job_id=f"{RUN_ID}-job")
        )
        dispatch = dispatch_json(self.scenario, RUN_ID, f"{RUN_ID}-job")
        job._info.job.attributes[ATTRIBUTE_SIMULATOR_DISPATCH] = dispatch
        end = getattr(self.server, "_simulation_end_fnc", None)
        if end is not None:
            job._simulation_end_fnc = end
        self.job_context = job
        return self

    def __exit__(self, *exc: object) -> None:
        if self._job is not None:
            self._job.close()
            self._job = None

    @property
    def context(self) -> Any:
        """The job's ``SimulationContext``, as the agent's ``simulation_context()`` sees it."""
        return self.job_context.simulation_context()

    def caller(self) -> SimulatedCaller | None:
        """lk-eval's simulated caller for the scenario (None: no caller model configured)."""
        found = self.evaluator.caller_for(self.scenario) if self.evaluator else None
        return SimulatedCaller(found) if found is not None else None

    async def verdict(self, session: Any) -> ScenarioVerdict:
        """Judge the session's conversation, then run the agent's ``on_simulation_end`` with
        that verdict; the scenario's result as ``lkeval run`` would give it.

        The simulation ends once, as LiveKit's does: a second call gives the first verdict
        (the agent's veto is not run again on a session that may have moved on).
        """
        if self._verdict is None:
            self._verdict = await self._end(session)
        return self._verdict

    async def _end(self, session: Any) -> ScenarioVerdict:
        from livekit.agents.simulation import SimulationVerdict

        from lkeval.llm.judge import combine_verdicts

        transcript = session_transcript(session)
        usage: dict[str, Usage] = {}
        verdicts: list[Verdict] = []
        if self.evaluator is not None:
            verdicts = list(await self.evaluator.judge(self.scenario, transcript, usage))
        maybe_is_pass = bool(self.evaluator and self.evaluator.maybe_is_pass)
        judged, why = combine_verdicts(verdicts, maybe_is_pass)
        provisional = SimulationVerdict(judged, why or "the judges passed it")
        sim = self.context
        sim._begin_finalize(simulator_verdict=provisional, run=None)
        end = getattr(self.job_context, "_simulation_end_fnc", None)
        if end is not None:
            await end(sim)
            vetoed = sim.user_verdict
            verdicts.append(
                Verdict("agent", "fail", vetoed.reason)
                if vetoed is not None and not vetoed.success
                else Verdict("agent", "pass")
            )
        if self.evaluator is not None:
            await self.evaluator.aclose()
        return ScenarioVerdict(self.scenario, tuple(transcript), verdicts, maybe_is_pass)


class SimulatedCaller:
    """lk-eval's caller speaking to a session the test drives."""

    def __init__(self, caller: Any) -> None:
        self._caller = caller

    async def next_line(self, session: Any) -> str | None:
        """The caller's next line given the conversation so far; None once it hangs up."""
        turn = await self._caller.next_message(session_transcript(session))
        return None if turn.ended else turn.text


class ScenarioVerdict:
    """The scenario's verdict on a test's session: ``passed``, ``result``, ``assert_passed()``."""

    def __init__(
        self,
        scenario: Scenario,
        transcript: tuple[TranscriptItem, ...],
        verdicts: Sequence[Verdict],
        maybe_is_pass: bool = False,
    ) -> None:
        from lkeval.llm.judge import combine_verdicts

        self.passed, _ = combine_verdicts(verdicts, maybe_is_pass)
        # As lkeval run decides it: the agent's on_simulation_end can veto, never pass; a
        # conversation no judge looked at is not a pass.
        reason = "" if any(v.source != "agent" for v in verdicts) else UNJUDGED
        self.passed = self.passed and not reason
        status: Status = "passed" if self.passed else "failed"
        attempt = Attempt(status=status, transcript=transcript, verdicts=tuple(verdicts))
        # Otherwise no reason of its own: the reports word it from the failing verdict.
        self.result = ScenarioResult.of(scenario, status, reason, attempts=(attempt,))
        self.verdicts = tuple(verdicts)

    def assert_passed(self) -> None:
        """Fail the test with the transcript and every reason when the scenario failed."""
        if not self.passed:
            pytest.fail(failure_text(self.result), pytrace=False)
