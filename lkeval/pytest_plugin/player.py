"""The one place the pytest plugin plays a scenario: in-process, through ``lkeval.inproc``.

One player per pytest session, made when the scenarios file is collected (with the run's
options, so a bad flag is a collection error, and nothing starts under ``--collect-only``). It
keeps one event loop and one evaluator (the caller's and the judge's clients) for all the
session's scenarios, as ``lkeval dev`` does, and closes both when pytest unconfigures.

What ``lkeval run`` checks before anything plays is checked here too, so a test cannot pass
where the gate would not: the caller's and judge's credentials, the judge preflight (its
canaries, kept between runs of the same judge as ``lkeval dev`` keeps them), and a scenario
with nothing to check (a result ``skipped`` for "nothing to check", which fails its test unless
``--allow-nothing-to-check``).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from lkeval.cli.options import RunOptions
from lkeval.errors import LkevalError
from lkeval.inproc import PlayOptions
from lkeval.inproc import ScenarioPlayer as InProcessPlayer
from lkeval.llm.evaluator import build_evaluator
from lkeval.results.model import ScenarioResult
from lkeval.scenarios.model import Scenario

PLAYER_KEY = pytest.StashKey["SessionPlayer"]()


def play_options(options: RunOptions) -> PlayOptions:
    """What of ``lkeval run``'s options applies in one interpreter (docs/pytest.md): the caller
    and judge, one attempt unless ``--repeat`` says more, the limits."""
    return PlayOptions(
        llm=options.llm,
        logs_dir=Path(options.logs_dir) if options.logs_dir else None,
        repeat=options.repeat or 1,
        min_pass=options.min_pass,
        boot_timeout=options.boot_timeout,
        turn_timeout=options.turn_timeout,
        max_turns=options.llm.max_turns,
        inference_class=options.inference_class,
    )


class SessionPlayer:
    """Plays the session's scenarios one at a time on one event loop of its own."""

    def __init__(self, options: RunOptions) -> None:
        self.agent = Path(options.agent)
        self.options = play_options(options)
        self.allow_nothing_to_check = options.report.allow_nothing_to_check
        self.selected: list[Scenario] = []
        """The scenarios pytest selected (``-k``, ``-m``): the caller and judge they need
        are built and their credentials checked once, as ``lkeval run`` does."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._player: InProcessPlayer | None = None
        self._broken: Exception | None = None

    def _start(self, scenario: Scenario) -> InProcessPlayer:
        """The in-process player with its evaluator, the judge preflight passed; a failure
        (credentials, a judge that fails its canaries) is kept and raised for every item."""
        if self._broken is not None:
            raise self._broken
        if self._player is None:
            try:
                evaluator = build_evaluator(self.options.llm, self.selected or [scenario])
                if evaluator is not None:
                    evaluator.cache_preflight = True
                    evaluator.preflight(sys.stdout)  # lines shown with a failed test's output
            except LkevalError as exc:
                self._broken = exc
                raise
            self._player = InProcessPlayer(self.agent, self.options, evaluator=evaluator)
        return self._player

    def play(self, scenario: Scenario) -> ScenarioResult:
        """The scenario's result; a crash of the agent is a result (status error), not a raise.

        A missing caller or judge setting raises ``LLMConfigError`` (the item shows its line).
        """
        player = self._start(scenario)
        evaluator = player.evaluator
        unchecked = scenario.nothing_to_check(
            judge_scripted=evaluator is not None and evaluator.judge_scripted,
            run_judges=evaluator.run_judges if evaluator is not None else (),
        )
        if unchecked is not None:  # as lkeval run decides it, before anything plays
            return ScenarioResult.of(scenario, "skipped", unchecked)
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(player.play(scenario))

    def close(self) -> None:
        """Close the evaluator's clients and the loop (pytest's unconfigure)."""
        if self._loop is None:
            if self._player is not None:  # nothing played: no client was made in a loop
                asyncio.run(self._player.aclose())
            return
        if self._player is not None:
            self._loop.run_until_complete(self._player.aclose())
        self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        self._loop.close()
        self._loop = self._player = None


def session_player(config: pytest.Config, options: RunOptions | None = None) -> SessionPlayer:
    """The session's player, made on first use with ``options``."""
    if PLAYER_KEY not in config.stash:
        assert options is not None, "the scenarios file makes the player when it is collected"
        player = SessionPlayer(options)
        config.stash[PLAYER_KEY] = player
        config.add_cleanup(player.close)
    return config.stash[PLAYER_KEY]
