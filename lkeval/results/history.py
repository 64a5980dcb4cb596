"""A scenario's pass-rate history on the default branch, and what it says about this run.

One earlier run says little about a noisy scenario: a scenario that passes 70% of the time on
main fails one run in three, and "passed in the baseline, failed now" would call that a
regression. So the baseline carries a rolling history: per scenario, its attempts and passes in
each of the last ``window`` runs of the baseline's branch. It travels inside the results file
(``history``): a run records the history it was compared with (its baseline's, with the
baseline's own run added: :func:`rolled`), so the next run that takes that file as its baseline
continues it, with no file of its own to keep. It is keyed by scenario id and the digest of the
scenario's content (``metadata.suite``): an edited scenario starts a fresh history.

What the history decides (:func:`judge_failure`), for a scenario that failed or errored now:

* **stable** on main (the 95% Wilson interval of its attempts' pass rate reaches the rate at
  which a fine scenario's attempts pass, 0.86 with a judge flipping 10%): the sequential test
  already found this run below that rate, so the failure is a regression;
* **flaky** or **failing** on main (the interval lies below it): Fisher's exact test
  (one-sided) on passed/failed attempts, this run against the history. Significantly lower
  (p < 0.05) is a regression. Not significantly lower is noise ("known flaky"), but only when
  the test could have told: were none of this run's attempts passing, p would be below 0.05.
  Otherwise (too few attempts to tell) the history says nothing and the baseline's own status
  decides, as without history. So a scenario that passed no attempt is never excused by its
  history, however flaky it is on main.

Only attempts that reached a verdict count in the history (an error on main does not make a
scenario look flaky); in this run every attempt that ran counts, an error as a fail. Both choices
make a failure harder to excuse.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

from lkeval.results.model import (
    History,
    HistoryRun,
    RunCount,
    RunResults,
    ScenarioHistory,
    ScenarioResult,
)
from lkeval.results.pass_rates import fisher_less, wilson_interval
from lkeval.results.sampling import SequentialRule

#: Runs a history keeps by default (``--history-runs``), and at most.
DEFAULT_WINDOW = 20
MAX_WINDOW = 100
#: Attempts (with a verdict) a history needs before it says anything.
MIN_ATTEMPTS = 10
#: One-sided significance level of Fisher's exact test.
ALPHA = 0.05

HistoryState = Literal["stable", "flaky", "failing"]
Judgement = Literal["regression", "noise", "unknown"]


@dataclass(frozen=True)
class HistoryRate:
    """A scenario's pass rate over the history: attempts with a verdict, passes, runs, the 95%
    Wilson interval and what that makes it on main."""

    passes: int
    attempts: int
    runs: int
    low: float
    high: float
    state: HistoryState

    @property
    def rate(self) -> float:
        """Passed attempts over attempts."""
        return self.passes / self.attempts if self.attempts else 0.0

    @property
    def text(self) -> str:
        """``70% on main (14 of 20 attempts over 6 runs, flaky)``."""
        return (
            f"{self.rate * 100:.0f}% on main ({self.passes} of {self.attempts} attempts over "
            f"{self.runs} run{'s' if self.runs != 1 else ''}, {self.state})"
        )


@dataclass(frozen=True)
class HistoryVerdict:
    """What the history says about a failure now: regression, noise, or unknown (the
    baseline's status decides), with Fisher's p-value when the test was run and the sentence
    the reports show."""

    judgement: Judgement
    p_value: float | None
    text: str


def rate_of(
    entry: ScenarioHistory | None, rule: SequentialRule | None = None
) -> HistoryRate | None:
    """The history's pass rate of one scenario; None with fewer than :data:`MIN_ATTEMPTS`."""
    if entry is None:
        return None
    passes = sum(c.passes for c in entry.counts)
    attempts = sum(c.attempts for c in entry.counts)
    if attempts < MIN_ATTEMPTS:
        return None
    the_rule = rule or SequentialRule()
    low, high = wilson_interval(passes, attempts)
    state: HistoryState = "stable"
    if high < the_rule.pass_rate(the_rule.broken):
        state = "failing"
    elif high < the_rule.pass_rate(the_rule.fine):
        state = "flaky"
    runs = sum(1 for c in entry.counts if c.attempts)
    return HistoryRate(passes, attempts, runs, low, high, state)


def judge_failure(scenario: ScenarioResult, rate: HistoryRate) -> HistoryVerdict:
    """What ``rate`` says about ``scenario``, which failed or errored in this run (see the
    module docstring)."""
    ran = [a for a in scenario.attempts if a.status != "skipped"]
    passes = sum(1 for a in ran if a.status == "passed")
    now = f"{passes} of {len(ran)} now"
    if rate.state == "stable":
        return HistoryVerdict("regression", None, f"{now}; {rate.text}")
    p = fisher_less(passes, len(ran), rate.passes, rate.attempts)
    test = f"{now} vs {rate.text}: p = {p:.3g} (Fisher's exact, one-sided)"
    if p < ALPHA:
        return HistoryVerdict("regression", p, f"{test}: significantly below main")
    if fisher_less(0, len(ran), rate.passes, rate.attempts) < ALPHA:
        return HistoryVerdict("noise", p, f"{test}: within main's noise (known flaky)")
    return HistoryVerdict(
        "unknown", p, f"{test}: too few attempts to tell; the baseline's status decides"
    )


def live_counts(scenario: ScenarioResult) -> tuple[int, int]:
    """(passes, attempts) of this run's live attempts that ran: an attempt replayed in full is
    main's own conversation again (already in the history), an error counts as a fail."""
    ran = [
        a
        for a in scenario.attempts
        if a.status != "skipped" and not (a.replay and a.replay.fully_replayed)
    ]
    return sum(1 for a in ran if a.status == "passed"), len(ran)


def slipped_passes(
    compared: Mapping[str, tuple[ScenarioResult, HistoryRate]],
) -> dict[str, HistoryVerdict]:
    """The scenarios the sequential test passed whose attempts pass significantly less often
    than their history on main: Fisher's exact test (one-sided) per scenario, corrected for
    the number of scenarios compared (Holm's step-down, family-wise error :data:`ALPHA`).

    The sequential test only tells fine from 90%-broken: a scenario broken in 30% of its
    conversations passes it 90% of the time. Its attempts, against main's, can tell more, at
    no extra LLM call. A regression under ``--fail-on regression``, a warning under ``any``."""
    tests: list[tuple[float, str, str]] = []
    for sid, (scenario, rate) in compared.items():
        passes, ran = live_counts(scenario)
        if not ran:
            continue
        p = fisher_less(passes, ran, rate.passes, rate.attempts)
        text = (
            f"passed the sequential test with {passes} of {ran} now vs {rate.text}: p = {p:.3g} "
            f"(Fisher's exact, one-sided, Holm-corrected over {len(compared)} scenario(s)): "
            "significantly below main"
        )
        tests.append((p, sid, text))
    found: dict[str, HistoryVerdict] = {}
    for rank, (p, sid, text) in enumerate(sorted(tests)):
        if p >= ALPHA / (len(tests) - rank):
            break
        found[sid] = HistoryVerdict("regression", p, text)
    return found


def scenario_entry(
    history: History | None, scenario_id: str, digest: str | None
) -> ScenarioHistory | None:
    """The history of one scenario as it is now: None when its content changed since (or
    either digest is unknown)."""
    if history is None or not digest:
        return None
    entry = history.scenarios.get(scenario_id)
    return entry if entry is not None and entry.digest == digest else None


def digests(results: RunResults) -> Mapping[str, str]:
    """Scenario id -> content digest of the suite a results file ran (empty when unknown)."""
    suite = results.metadata.suite
    return suite.scenarios if suite is not None else {}


def run_count(scenario: ScenarioResult, run: str) -> RunCount:
    """One scenario's counts in one run: attempts with a verdict, and passes.

    An attempt replayed in full from a cassette (``--cassettes``) is not a sample: it is the
    recorded run's conversation and verdict again, already counted when it was recorded, so
    counting it would make a scenario look surer than it is. Only live attempts count."""
    judged = [
        a
        for a in scenario.attempts
        if a.status in ("passed", "failed") and not (a.replay and a.replay.fully_replayed)
    ]
    passes = sum(1 for a in judged if a.status == "passed")
    return RunCount(run, passes, len(judged), scenario.status)


def rolled(baseline: RunResults, window: int = DEFAULT_WINDOW) -> History:
    """The history a run compared with ``baseline`` carries forward: the baseline's own
    history, its own run added (once: a baseline seen twice is not counted twice), scenarios
    whose content changed restarted, scenarios no longer in its suite dropped, and only the
    last ``window`` runs kept. Deterministic: the same baseline gives the same history."""
    window = max(1, min(window, MAX_WINDOW))
    before = baseline.history or History(window)
    meta = baseline.metadata
    suite = digests(baseline)
    this_run = HistoryRun(meta.started_at, meta.git_sha)
    counted = this_run in before.runs or not meta.started_at or meta.interrupted
    runs = list(before.runs) if counted else [*before.runs, this_run]
    runs = runs[-window:]
    kept = {r.started_at for r in runs}
    results = {s.scenario_id: s for s in baseline.scenarios}
    scenarios: dict[str, ScenarioHistory] = {}
    for scenario_id in sorted(suite):
        digest = suite[scenario_id]
        old = scenario_entry(before, scenario_id, digest) or ScenarioHistory(digest)
        counts = [c for c in old.counts if c.run in kept]
        calibration = old.calibration
        result = results.get(scenario_id)
        if result is not None and not counted and result.status != "skipped":
            counts.append(run_count(result, meta.started_at))
        if result is not None and result.calibration is not None:
            calibration = result.calibration
        if counts or calibration is not None:
            scenarios[scenario_id] = ScenarioHistory(digest, tuple(counts), calibration)
    return History(window, tuple(runs), scenarios)


def with_history(results: RunResults, baseline: RunResults | None, window: int) -> RunResults:
    """``results`` carrying the history it was compared with (``baseline`` rolled, limited to
    the scenarios of this run's suite whose content is unchanged)."""
    if baseline is None:
        return results
    history = rolled(baseline, window)
    now = digests(results)
    kept = {
        sid: entry
        for sid, entry in history.scenarios.items()
        if scenario_entry(history, sid, now.get(sid)) is not None
    }
    return replace(results, history=replace(history, scenarios=kept))


__all__ = [
    "ALPHA",
    "DEFAULT_WINDOW",
    "MAX_WINDOW",
    "MIN_ATTEMPTS",
    "HistoryRate",
    "HistoryVerdict",
    "digests",
    "judge_failure",
    "live_counts",
    "rate_of",
    "rolled",
    "scenario_entry",
    "slipped_passes",
    "with_history",
]
