"""The records of a results file that look back: the pass-rate history a baseline carries
(per scenario, over the last runs of its branch) and each scenario's judge calibration.
Part of the result model (:mod:`lkeval.results.model` re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Calibration:
    """How well the judge tells one scenario's good conversations from broken ones
    (``lkeval calibrate``, ``lkeval.llm.calibrate``): its votes on a passing transcript and on
    negative controls built from it (decisive tool call dropped, booked values changed,
    confirmation removed, a refusal swapped in)."""

    false_passes: int
    control_votes: int
    false_fails: int
    good_votes: int
    controls: tuple[str, ...] = ()
    judge_model: str = ""
    measured_at: str = ""


@dataclass(frozen=True)
class RunCount:
    """One scenario in one earlier run: attempts that reached a verdict, how many passed, and
    the scenario's status in that run. ``run`` is that run's ``started_at``."""

    run: str
    passes: int
    attempts: int
    status: str = ""


@dataclass(frozen=True)
class ScenarioHistory:
    """One scenario's counts over earlier runs, valid for its content ``digest`` only (an
    edited scenario starts a fresh history), and its latest judge calibration."""

    digest: str
    counts: tuple[RunCount, ...] = ()
    calibration: Calibration | None = None


@dataclass(frozen=True)
class HistoryRun:
    """One earlier run counted in a history (oldest first)."""

    started_at: str
    git_sha: str | None = None


@dataclass(frozen=True)
class History:
    """Per-scenario pass counts over the last ``window`` runs of the baseline's branch, as the
    baseline carried them (lkeval.results.history): the runs before this one."""

    window: int
    runs: tuple[HistoryRun, ...] = ()
    scenarios: dict[str, ScenarioHistory] = field(default_factory=dict)


__all__ = ["Calibration", "History", "HistoryRun", "RunCount", "ScenarioHistory"]
