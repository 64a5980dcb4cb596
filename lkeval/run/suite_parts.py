"""What a run is handed (:class:`Collaborators`): how to judge, show progress, write its
outputs, record the commit and start agents. :class:`lkeval.run.suite.Suite` decides nothing of
these; the command line (:mod:`lkeval.cli.run`) builds them and tests hand in their own."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from lkeval.agents.launch import StartingLauncher, begin_launcher
from lkeval.agents.session_agent import AgentFactory
from lkeval.results.controls import KnownBad
from lkeval.results.model import Calibration, RunResults
from lkeval.run.collaborators import RunEvaluator
from lkeval.run.early_start import EARLY, EarlyStart
from lkeval.run.engine import ProgressObserver
from lkeval.scenarios.model import Scenario


class Writers(Protocol):
    """Where a run's outputs go: checked before the first boot, written after the last."""

    def check_writable(self, paths: Sequence[Path]) -> None:
        """Raise (exit 2) when an output path cannot be written."""
        ...

    def check_baseline(self) -> Mapping[str, tuple[str, Calibration]]:
        """Resolve the baseline (a file, or fetched from GitHub); raise (exit 2) when it
        cannot be used. One that is not there (nothing fetched) is not an error. Returns the
        judge calibrations its history holds (scenario id -> (content digest, calibration))."""
        ...

    def lock(self, results_dir: Path) -> AbstractContextManager[object]:
        """Hold the results directory: one run writes into it at a time."""
        ...

    def known_bad_controls(
        self, scenarios: Sequence[Scenario], calibrated: Mapping[str, tuple[str, Calibration]]
    ) -> tuple[KnownBad, ...]:
        """Known-bad versions of the baseline's passing conversations of the calibrated
        scenarios, for the judge preflight (none without a baseline)."""
        ...

    def write_results(self, path: Path, results: RunResults) -> None:
        """Write the (masked) results file; raises :class:`~lkeval.errors.OutputError`."""
        ...

    def finish(self, results: RunResults, path: Path, interrupted: bool) -> int:
        """Reports, publishing and the gate line; the gate's exit code."""
        ...


LauncherOpener = Callable[..., StartingLauncher]
""":func:`lkeval.agents.launch.begin_launcher`'s signature: the launcher on its way."""
EvaluatorFactory = Callable[[Sequence[Scenario], Path], "RunEvaluator | None"]
"""(selected scenarios, logs dir) → the evaluator they need; raises on bad credentials."""


@dataclass(frozen=True)
class Collaborators:
    """What a run is handed: how to judge, show progress, write, and start agents."""

    evaluator: EvaluatorFactory
    progress: Callable[[int], ProgressObserver]
    """Total number of scenarios → the progress display."""
    writers: Writers
    commit: Callable[[], tuple[str | None, str | None]] = lambda: (None, None)
    """(sha, branch) the results record."""
    launcher: LauncherOpener = begin_launcher
    early: EarlyStart = EARLY
    """The fork server ``python -m lkeval`` started before its imports, if any: the run
    takes it when it is the one it would start (:mod:`lkeval.run.early_start`)."""
    agents: AgentFactory | None = None
    """Each attempt's agent; None: a process through the launcher. ``lkeval dev`` hands in
    the in-process player's (:mod:`lkeval.inproc`), whose ``start_line`` the run prints."""


__all__ = ["Collaborators", "EvaluatorFactory", "LauncherOpener", "Writers"]
