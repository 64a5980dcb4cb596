"""The run's one line about the agents' speed patches, printed when the first agent reports.

Why: each speed patch of livekit-agents internals (``host/pins.py``) turns itself off on a
release whose wrapped functions changed. Off, nothing breaks, the run is only slower; without a
line a user would never know, and a maintainer would not see a new release's cost. The agent's
host reports them with ``prepared``; the first scenario to finish carries them
(``Attempt.speed_patches``), and every attempt keeps its own in results.json.
"""

from __future__ import annotations

from typing import Any, TextIO

from lkeval.results.model import ScenarioResult
from lkeval.run.engine import ProgressObserver
from lkeval.text.untrusted import inert_line


def describe(patches: dict[str, str]) -> str:
    """``speed patches: tool_schemas on (verified ...), idle_timers off (...)``."""
    return "speed patches: " + ", ".join(f"{name} {state}" for name, state in patches.items())


class PatchesLine:
    """A progress observer that writes :func:`describe` once, before the first scenario's own
    line that has an agent's report, then passes everything on to ``progress``."""

    def __init__(self, progress: ProgressObserver, out: TextIO) -> None:
        self._progress = progress
        self._out = out
        self._written = False

    def scenario_started(self, scenario_id: str, label: str) -> None:
        self._progress.scenario_started(scenario_id, label)

    def scenario_finished(self, result: ScenarioResult) -> None:
        if not self._written:
            reported = next((a.speed_patches for a in result.attempts if a.speed_patches), None)
            if reported:
                self._written = True
                self._out.write(inert_line(describe(reported)) + "\n")  # the agent's words
                self._out.flush()
        self._progress.scenario_finished(result)

    def __getattr__(self, name: str) -> Any:  # anything else a display offers
        return getattr(self._progress, name)
