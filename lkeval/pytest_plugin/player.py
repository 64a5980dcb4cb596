"""The one place the pytest plugin plays a scenario: :func:`play_scenario`.

One player per pytest session, made when the scenarios file is collected (with the run's
options, so a bad flag is a collection error) and used by every item.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from lkeval.cli.options import RunOptions
from lkeval.results.model import ScenarioResult
from lkeval.results.results_json import load_results
from lkeval.scenarios.model import Scenario

PLAYER_KEY = pytest.StashKey["ScenarioPlayer"]()


class ScenarioPlayer:
    """Plays the session's scenarios one at a time, with the session's options."""

    def __init__(self, options: RunOptions) -> None:
        self.options = options

    def play(self, scenario: Scenario) -> ScenarioResult:
        """The scenario's result; a crash of the agent is a result (status error), not a raise."""
        return play_scenario(self.options, scenario)


def session_player(config: pytest.Config, options: RunOptions | None = None) -> ScenarioPlayer:
    """The session's player, made on first use with ``options``."""
    if PLAYER_KEY not in config.stash:
        assert options is not None, "the scenarios file makes the player when it is collected"
        config.stash[PLAYER_KEY] = ScenarioPlayer(options)
    return config.stash[PLAYER_KEY]


def play_scenario(options: RunOptions, scenario: Scenario) -> ScenarioResult:
    """Play one scenario. Stand-in until the in-process player lands: one ``lkeval run``
    of that scenario alone, its results read back."""
    with tempfile.TemporaryDirectory(prefix="lkeval-pytest-") as folder:
        results = Path(folder) / "results.json"
        argv = [
            *("--agent", options.agent, "--scenarios", scenario.file),
            *("--match", scenario.id, "--results", str(results), "--repeat", "1"),
            "--no-settings",
        ]
        for role in ("caller", "judge"):
            endpoint = options.llm.endpoint(role)
            if endpoint.model:
                argv += [f"--{role}-model", endpoint.model]
            if endpoint.base_url:
                argv += [f"--{role}-base-url", endpoint.base_url]
        subprocess.run(
            [sys.executable, "-m", "lkeval", "run", *argv],
            env=dict(os.environ),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
        found = [s for s in load_results(results).scenarios if s.scenario_id == scenario.id]
        if not found:
            raise RuntimeError(json.dumps(argv))
        return found[0]
