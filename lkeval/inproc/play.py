"""Play scenarios in-process: the public API of ``lkeval dev`` and lk-eval's pytest plugin.

::

    from lkeval.inproc import PlayOptions, play_scenario
    result = play_scenario("agent.py", scenario, PlayOptions(llm=llm_options))
    assert result.status == "passed", result.reason

A scenario (``lkeval.scenarios.loader.load_or_raise``) plays against the user's agent module,
imported into this interpreter, through the attempt ``lkeval run`` plays
(:class:`~lkeval.run.attempt.ScenarioAttempt`) and the engine that decides a scenario from its
attempts (:class:`~lkeval.run.engine.Engine`): the same simulated caller, scripted turns,
expectations, judges and veto, and a :class:`~lkeval.results.model.ScenarioResult` as in
``results.json``. Only the agent differs: :class:`~lkeval.inproc.agent.InProcessAgent`
instead of an agent process.

:class:`ScenarioPlayer` keeps one evaluator (the caller's and judge's clients) for several
scenarios; :func:`play_scenario` is one scenario, one event loop, and runs the judge preflight
first (the evaluator's ``preflight``; a caller of :class:`ScenarioPlayer` or
:func:`aplay_scenario` runs it, outside the event loop, as ``lkeval dev`` and the pytest plugin
do). A scenario with nothing to check is skipped, as ``lkeval run`` skips it, never passed.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lkeval import defaults
from lkeval.agents.process import AgentLaunch
from lkeval.inproc.agent import AUDIO_REFUSED, Echo, in_process_agents
from lkeval.llm.config import LLMOptions
from lkeval.llm.evaluator import LLMEvaluator, build_evaluator
from lkeval.results.model import ScenarioResult
from lkeval.results.pricing import PriceTable
from lkeval.run.attempt import RunSettings
from lkeval.run.engine import Engine, EngineOptions, attempt_factory
from lkeval.run.revote import ask_again_with
from lkeval.run.suite import nothing_to_check
from lkeval.scenarios.model import Scenario


@dataclass(frozen=True)
class PlayOptions:
    """How scenarios play in-process (the run's flags that apply to one interpreter)."""

    llm: LLMOptions = field(default_factory=LLMOptions)
    """The caller's and judge's models (``--caller-model``, ``--judge-model`` ...)."""
    logs_dir: Path | None = None
    """Where each attempt's (masked) agent log goes; None: a temporary directory."""
    repeat: int = 1
    """Attempts per scenario (a scenario's own ``repeat:``/``min_pass:`` wins)."""
    min_pass: int | None = None
    boot_timeout: float = defaults.BOOT_TIMEOUT
    turn_timeout: float = defaults.TURN_TIMEOUT
    max_turns: int = defaults.MAX_TURNS
    inference_class: str = defaults.INFERENCE_CLASS
    echo: Echo | None = field(default=None, compare=False)
    """Called with each session event as it arrives (``lkeval dev`` prints the transcript)."""


class ScenarioPlayer:
    """Plays scenarios of one agent in this interpreter, one at a time; ``await aclose()``.

    Its LLM clients are made in the event loop of the first :meth:`play` and belong to it:
    play every scenario of one player in the same loop (``play_scenario`` makes a player per
    scenario, each in a loop of its own)."""

    def __init__(
        self,
        agent: str | Path,
        options: PlayOptions | None = None,
        evaluator: LLMEvaluator | None = None,
        scenarios: Sequence[Scenario] = (),
    ) -> None:
        """``evaluator``: the caller and judge (default: built from ``options.llm`` for
        ``scenarios``, credentials checked now: :class:`~lkeval.llm.config.LLMConfigError`)."""
        self.options = options or PlayOptions()
        self.agent = Path(agent)
        self.evaluator = evaluator
        if evaluator is None and scenarios:
            self.evaluator = build_evaluator(self.options.llm, scenarios)
        self._own_logs: tempfile.TemporaryDirectory[str] | None = None
        self.run_id = f"lkeval-dev-{uuid.uuid4().hex[:12]}"

    def settings(self) -> RunSettings:
        """The attempts' settings: in-process agents, the run's limits."""
        options = self.options
        logs = options.logs_dir
        if logs is None:
            self._own_logs = self._own_logs or tempfile.TemporaryDirectory(prefix="lkeval-dev-")
            logs = Path(self._own_logs.name)
        launch = AgentLaunch(agent=self.agent.resolve(), inference_class=options.inference_class)
        return RunSettings(
            launch=launch,
            logs_dir=logs,
            work_dir=logs,
            boot_timeout=options.boot_timeout,
            turn_timeout=options.turn_timeout,
            max_turns=options.max_turns,
            prices=PriceTable(dict(options.llm.prices)),
            agents=in_process_agents(options.echo),
        )

    async def play(self, scenario: Scenario) -> ScenarioResult:
        """One scenario to its result (its attempts one after another)."""
        if scenario.plays_audio("text"):
            return ScenarioResult.of(scenario, "error", AUDIO_REFUSED)
        if self.evaluator is None:
            self.evaluator = build_evaluator(self.options.llm, [scenario])
        evaluator = self.evaluator
        unchecked = nothing_to_check([scenario], evaluator).get(scenario.id)
        if unchecked is not None:  # as lkeval run decides it, before anything plays: no pass
            return ScenarioResult.of(scenario, "skipped", unchecked)
        engine_options = EngineOptions(
            concurrency=1,
            repeat=self.options.repeat,
            min_pass=self.options.min_pass,
            warm_starts=False,
        )
        engine = Engine(
            attempt_factory(self.settings(), evaluator, self.run_id),
            _Quiet(),
            engine_options,
            ask_again=ask_again_with(evaluator) if evaluator is not None else None,
        )
        results = await engine.run([scenario])
        return results[0]

    async def aclose(self) -> None:
        """Close the caller's and judge's clients, and a temporary log directory."""
        if self.evaluator is not None:
            await self.evaluator.aclose()
        if self._own_logs is not None:
            self._own_logs.cleanup()
            self._own_logs = None


async def aplay_scenario(
    agent: str | Path, scenario: Scenario, options: PlayOptions | None = None
) -> ScenarioResult:
    """Play one scenario in-process, in the running event loop; its result."""
    player = ScenarioPlayer(agent, options, scenarios=[scenario])
    try:
        return await player.play(scenario)
    finally:
        await player.aclose()


def play_scenario(
    agent: str | Path, scenario: Scenario, options: PlayOptions | None = None
) -> ScenarioResult:
    """Play one scenario in-process, in an event loop of its own; its result.

    ``result.status`` is ``passed``, ``failed``, ``error`` or ``skipped``; ``result.reason``
    says why; ``result.attempts[-1]`` has the transcript, the checks (``expectations``), the
    verdicts (the judges' and the agent's own ``on_simulation_end`` veto) and the log path.
    The judge is checked on its canaries first (kept per judge, as ``lkeval dev`` keeps it):
    one that cannot tell a failed conversation raises ``JudgePreflightError``. A scenario with
    nothing to check is ``skipped``, never ``passed``.
    """
    player = ScenarioPlayer(agent, options, scenarios=[scenario])
    if player.evaluator is not None:  # the judge on its canaries first, as lkeval run does
        player.evaluator.cache_preflight = True
        player.evaluator.preflight(sys.stderr)

    async def play() -> ScenarioResult:
        try:
            return await player.play(scenario)
        finally:
            await player.aclose()

    return asyncio.run(play())


class _Quiet:
    """No progress lines (``lkeval dev`` prints its own; a test runner reports results)."""

    def scenario_started(self, scenario_id: str, label: str) -> None:
        pass

    def scenario_finished(self, result: ScenarioResult) -> None:
        pass
