"""The run's facts for the results file: versions, times, commit, how agents started and how
loaded the machine was, the sampling rule and the suite's fingerprint (argv with its secrets
redacted). :class:`lkeval.run.suite.Suite` knows the run; this module only words it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import signal
import time
from dataclasses import dataclass

from lkeval import __version__
from lkeval.results.model import (
    RunMetadata,
    ScenarioResult,
    SuiteFingerprint,
    run_inference_class,
    run_start_mode,
)
from lkeval.run.plan import Plan, SuiteSettings
from lkeval.scenarios.model import shard_text
from lkeval.text.masking import redact_argv


@dataclass(frozen=True)
class RunFacts:
    """What the suite knows of its run beyond the settings, when the metadata is written."""

    started_at: dt.datetime
    started: float
    """``time.monotonic()`` at the start: the duration is measured from it."""
    commit: tuple[str | None, str | None]
    """(sha, branch) the results record."""
    conversation_mode: str
    speech: str
    plan: Plan | None


def run_metadata(
    settings: SuiteSettings,
    facts: RunFacts,
    scenario_results: list[ScenarioResult],
    stopped_by: signal.Signals | None,
) -> RunMetadata:
    """The run's facts for the results file (argv with secrets redacted)."""
    plan = facts.plan
    return RunMetadata(
        lkeval_version=__version__,
        livekit_agents_version=_installed("livekit-agents"),
        agent=settings.agent,
        scenario_files=settings.scenario_files,
        started_at=facts.started_at.isoformat(timespec="seconds"),
        finished_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        duration_seconds=round(time.monotonic() - facts.started, 3),
        git_sha=facts.commit[0],
        git_branch=facts.commit[1],
        shard=shard_text(settings.shard),
        interrupted=stopped_by is not None,
        argv=redact_argv(list(settings.argv)),
        start_mode=run_start_mode(scenario_results),
        conversation_mode=facts.conversation_mode,
        speech=facts.speech,
        max_load=_max_load(scenario_results),
        cores=os.cpu_count() or 0,
        concurrency=settings.engine.concurrency,
        inference_class=run_inference_class(scenario_results),
        sampling_rule=_rule_record(settings, scenario_results),
        suite=SuiteFingerprint.of(plan.suite, settings.verdict_options) if plan else None,
    )


def _rule_record(
    settings: SuiteSettings, scenario_results: list[ScenarioResult]
) -> dict[str, float]:
    """The sequential test's parameters when a scenario ran it (``lkeval report``
    recomputes)."""
    if not any(s.sampling and s.sampling.mode == "sequential" for s in scenario_results):
        return {}
    return dataclasses.asdict(settings.engine.sampling)


def _max_load(scenario_results: list[ScenarioResult]) -> float | None:
    """The highest load average an audio turn ended with (None: no audio turn measured it)."""
    loads = [
        t.load for s in scenario_results for a in s.attempts for t in a.turns if t.load is not None
    ]
    return max(loads) if loads else None


def _installed(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


__all__ = ["RunFacts", "run_metadata"]
