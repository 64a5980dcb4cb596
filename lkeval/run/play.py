"""The engine's part of one run: the lines that open it, the attempts' settings, the engine,
and its play (the run's speech started before the first attempt and stopped after the last).

:class:`lkeval.run.suite.Suite` owns the run's lifetime (launcher, raw logs, signals); what it
hands the engine, and how the engine plays, is here.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import TextIO

from lkeval import defaults
from lkeval.agents.interface import Launcher
from lkeval.agents.memory import MemoryPlan, headroom
from lkeval.agents.process import LIVE_PROCESSES, AgentLaunch
from lkeval.replay.session import Cassettes
from lkeval.results.model import ScenarioResult
from lkeval.results.pricing import PriceTable
from lkeval.run.attempt import RunSettings
from lkeval.run.collaborators import RunEvaluator
from lkeval.run.control import check_control_with
from lkeval.run.engine import Engine, ProgressObserver, attempt_factory
from lkeval.run.plan import Plan, SuiteSettings
from lkeval.run.revote import ask_again_with
from lkeval.run.speech import RunSpeech
from lkeval.scenarios.model import Scenario
from lkeval.text.untrusted import inert_line


def memory_plan() -> MemoryPlan | None:
    """The plan of the agents' memory, from what is available as the engine starts."""
    room = headroom()
    return MemoryPlan(room, lambda: LIVE_PROCESSES) if room is not None else None


def write_start_lines(out: TextIO, start_line: str, memory: MemoryPlan | None, plan: Plan) -> None:
    """How agents start, what bounds their memory, and how many scenarios were selected."""
    out.write(start_line + "\n")
    if memory is not None:  # what bounds the agents' memory, all of them together
        out.write(memory.describe() + "\n")
    unselected = len(plan.scenarios) - len(plan.selected)
    if unselected:  # one line for all of them; the progress counts what runs
        selection = plan.engine_options.selection.describe()
        line = (
            f"{len(plan.selected)} of {len(plan.scenarios)} scenarios selected "
            f"({selection}); {unselected} not selected (reported skipped)"
        )
        out.write(inert_line(line) + "\n")  # masked, inert
    out.flush()


def attempt_settings(
    settings: SuiteSettings,
    launch: AgentLaunch,
    raw_logs: Path,
    cassettes: Cassettes | None,
    speech: RunSpeech | None,
) -> RunSettings:
    """What every attempt of the run is given. The scenario reaches each agent over its
    control channel, and each agent's own directory sits beside its log."""
    return RunSettings(
        launch=dataclasses.replace(launch, raw_log_dir=raw_logs),
        logs_dir=settings.logs_dir,
        work_dir=settings.logs_dir,
        boot_timeout=settings.boot_timeout,
        turn_timeout=settings.turn_timeout,
        max_turns=settings.max_turns,
        prices=PriceTable(dict(settings.prices)),
        cassettes=cassettes,
        mode=settings.mode,
        audio=speech,
    )


def for_launcher(plan: Plan, launcher: Launcher, concurrency_given: bool) -> Plan:
    """The plan as the launcher can carry it out: cold starts have no warm starts, and the
    cold default concurrency unless ``--concurrency`` was given."""
    if launcher.mode != "cold":
        return plan
    options = dataclasses.replace(plan.engine_options, warm_starts=False)
    if not concurrency_given:
        options = dataclasses.replace(options, concurrency=defaults.default_concurrency(warm=False))
    return dataclasses.replace(plan, engine_options=options)


def build_engine(
    plan: Plan,
    settings: RunSettings,
    evaluator: RunEvaluator | None,
    progress: ProgressObserver,
    memory: MemoryPlan | None,
) -> Engine:
    """The engine of the run: its attempts, the judge's further votes and controls (through
    the run's cassettes), and the memory plan's admission."""
    cassettes = settings.cassettes
    return Engine(
        attempt_factory(settings, evaluator),
        progress,
        plan.engine_options,
        ask_again=ask_again_with(evaluator, cassettes) if evaluator is not None else None,
        admission=memory.slot if memory is not None else None,
        check_control=check_control_with(evaluator, cassettes) if evaluator is not None else None,
    )


async def play(
    engine: Engine,
    scenarios: list[Scenario],
    speech: RunSpeech | None,
    evaluator: RunEvaluator | None,
) -> list[ScenarioResult]:
    """Run the engine; the speech is started first and, like the LLM clients, closed after
    whatever way the play ends."""
    try:
        if speech is not None:
            await speech.start()
        return await engine.run(scenarios)
    finally:
        if speech is not None:
            with contextlib.suppress(Exception):
                await speech.stop()
        if evaluator is not None:
            with contextlib.suppress(Exception):
                await evaluator.aclose()


__all__ = [
    "attempt_settings",
    "build_engine",
    "for_launcher",
    "memory_plan",
    "play",
    "write_start_lines",
]
