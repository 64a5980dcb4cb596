"""Compare a run with a baseline run, scenario by scenario.

LLM-judged evals are never all green, so "any failure blocks the merge" is too blunt for many
teams: what they want to block is a scenario that *used to pass* and now does not, or that
fails where the baseline never showed it failing (:attr:`ScenarioChange.unaccounted`). A baseline
is simply an earlier results file (usually from the default branch). Scenarios are matched by
``scenario_id``: the stable ``id`` from the scenario file, or the id lk-eval derives from
group name + label when the file has none (so renaming a label without an id reads as one
scenario removed and one new).

When the baseline carries a pass-rate history (:mod:`lkeval.results.history`), a scenario that
fails now is judged against its rate over the last runs, not against one outcome: a failure of
a scenario known to be flaky on main is noise unless its rate now is significantly lower.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from lkeval.results.conditions import inference_class_change, mode_change, model_changes
from lkeval.results.deltas import MetricDelta as MetricDelta
from lkeval.results.deltas import cost_delta, latency_delta
from lkeval.results.history import (
    DEFAULT_WINDOW,
    HistoryRate,
    HistoryVerdict,
    digests,
    judge_failure,
    rate_of,
    rolled,
    scenario_entry,
    slipped_passes,
)
from lkeval.results.metrics import (
    scenario_metrics,
    suite_metrics,
)
from lkeval.results.model import (
    Calibration,
    History,
    RunResults,
    ScenarioHistory,
    ScenarioResult,
    Status,
)

ChangeKind = Literal["regression", "fixed", "new", "removed", "unchanged"]

_BAD: frozenset[str] = frozenset({"failed", "error"})


@dataclass(frozen=True)
class ScenarioChange:
    """How one scenario moved between the baseline and the current run."""

    scenario_id: str
    label: str
    group_name: str
    kind: ChangeKind
    current: Status | None
    baseline: Status | None
    current_pass_rate: float | None = None
    baseline_pass_rate: float | None = None
    latency_p95: MetricDelta | None = None
    cost: MetricDelta | None = None
    # The scenario's pass rate over the baseline's history (None without enough of it), and,
    # when it failed now, what that history says about the failure.
    history: HistoryRate | None = None
    history_verdict: HistoryVerdict | None = None
    # The judge's calibration on this scenario's content, from the history (lkeval calibrate).
    calibration: Calibration | None = None

    @property
    def slipped(self) -> bool:
        """Passed now, but its attempts pass significantly less often than its history
        (:func:`lkeval.results.history.slipped_passes`; ``history_verdict`` says so)."""
        verdict = self.history_verdict
        return (
            self.current == "passed" and verdict is not None and verdict.judgement == "regression"
        )

    @property
    def unaccounted(self) -> bool:
        """Failed or errored now, no regression, and nothing on main shows it going wrong.

        The baseline accounts for a failure now only when it failed there too (a verdict), when
        it errored on both sides (the same breakage, no verdict either side), or when the
        history calls the failure noise (main's own attempts fail it as often). Not in the
        baseline (new), skipped or not run there (not selected, no LLM, interrupted), or
        errored there while it fails a check now: main never showed it failing, so under
        ``--fail-on regression`` it blocks like a regression (:mod:`lkeval.results.gate`).
        """
        if self.current not in _BAD or self.kind == "regression":
            return False
        if self.history_verdict is not None and self.history_verdict.judgement == "noise":
            return False
        if self.baseline == "failed":
            return False
        return not (self.baseline == "error" and self.current == "error")

    @property
    def baseline_without_verdict(self) -> str:
        """How the baseline ended an :attr:`unaccounted` scenario it holds, in words
        (``skipped``, ``errored``); empty for a new one."""
        return {"skipped": "skipped", "error": "errored"}.get(self.baseline or "", "")


@dataclass(frozen=True)
class Comparison:
    """Every scenario of both runs, classified; current order first, then removed ones."""

    changes: tuple[ScenarioChange, ...]
    baseline_sha: str | None = None
    baseline_started_at: str = ""
    # The suite line: pass rate (0..1), p95 turn latency (ms) and cost (USD), before -> after.
    pass_rate: MetricDelta = field(default_factory=MetricDelta)
    latency_p95: MetricDelta = field(default_factory=MetricDelta)
    cost: MetricDelta = field(default_factory=MetricDelta)
    cost_unpriced: bool = False
    baseline_verdicts: int | None = None
    """Baseline scenarios that ran to a verdict (passed or failed); 0 means the baseline saw
    nothing (every scenario errored or did not run), so no regression can be seen against it."""
    baseline_source: str = ""
    """Where the baseline came from when it was fetched (``main run #12 (commit …, success)``),
    else the file's path; set by the command, not by :func:`compare`."""
    baseline_url: str | None = None
    """The page of the baseline's run, when it was fetched from GitHub."""
    model_changes: tuple[str, ...] = ()
    """``judge model changed: a → b``: verdicts of another judge (or against another caller)
    are not like for like, so a regression or fix may be the model's, not the agent's."""
    history_runs: int = 0
    # False when the runs' latency measured different things (a text baseline, an audio run):
    # the deltas are shown, never flagged as a regression.
    latency_comparable: bool = True
    """Runs of the baseline's branch in the history the scenarios were judged against."""

    def _of(self, kind: ChangeKind) -> tuple[ScenarioChange, ...]:
        return tuple(c for c in self.changes if c.kind == kind)

    @property
    def regressions(self) -> tuple[ScenarioChange, ...]:
        """Passed in the baseline, failed or errored now."""
        return self._of("regression")

    @property
    def fixed(self) -> tuple[ScenarioChange, ...]:
        """Failed or errored in the baseline, passes now."""
        return self._of("fixed")

    @property
    def new(self) -> tuple[ScenarioChange, ...]:
        """Not in the baseline."""
        return self._of("new")

    @property
    def removed(self) -> tuple[ScenarioChange, ...]:
        """In the baseline, not in this run."""
        return self._of("removed")

    @property
    def unchanged(self) -> tuple[ScenarioChange, ...]:
        """Everything else (same outcome, or skipped on either side)."""
        return self._of("unchanged")

    @property
    def known_flaky(self) -> tuple[ScenarioChange, ...]:
        """Scenarios of this run whose history shows them flaky on the baseline's branch."""
        return tuple(
            c for c in self.changes if c.history is not None and c.history.state == "flaky"
        )

    @property
    def slipped(self) -> tuple[ScenarioChange, ...]:
        """Passed the sequential test, yet significantly below their history on main."""
        return tuple(c for c in self.changes if c.slipped)

    def change_for(self, scenario_id: str) -> ScenarioChange | None:
        """The change of one current or removed scenario."""
        for change in self.changes:
            if change.scenario_id == scenario_id:
                return change
        return None


def compare(current: RunResults, baseline: RunResults, window: int = DEFAULT_WINDOW) -> Comparison:
    """Classify every scenario of ``current`` against ``baseline`` by ``scenario_id``, and
    against the pass-rate history ``baseline`` carries (its last ``window`` runs)."""
    before = _by_id(baseline.scenarios)
    now = _by_id(current.scenarios)
    history = rolled(baseline, window)
    changes: list[ScenarioChange] = []
    for scenario_id, result in now.items():
        old = before.get(scenario_id)
        entry = _history_entry(history, current, result)
        rate = rate_of(entry)
        verdict = judge_failure(result, rate) if rate and result.status in _BAD else None
        changes.append(
            ScenarioChange(
                scenario_id=scenario_id,
                label=result.label,
                group_name=result.group_name,
                kind=_classify(result.status, old.status if old else None, verdict),
                current=result.status,
                baseline=old.status if old else None,
                current_pass_rate=result.pass_rate,
                baseline_pass_rate=old.pass_rate if old else None,
                history=rate,
                history_verdict=verdict,
                calibration=entry.calibration if entry is not None else None,
                **_metric_deltas(result, old),
            )
        )
    changes = _with_slipped(changes, now, history, current)
    for scenario_id, old in before.items():
        if scenario_id not in now:
            changes.append(
                ScenarioChange(
                    scenario_id=scenario_id,
                    label=old.label,
                    group_name=old.group_name,
                    kind="removed",
                    current=None,
                    baseline=old.status,
                    baseline_pass_rate=old.pass_rate,
                )
            )
    now_suite, before_suite = suite_metrics(current), suite_metrics(baseline)
    return Comparison(
        changes=tuple(changes),
        baseline_sha=baseline.metadata.git_sha,
        baseline_started_at=baseline.metadata.started_at,
        pass_rate=MetricDelta(_pass_rate(baseline), _pass_rate(current)),
        latency_p95=latency_delta(now_suite, before_suite),
        cost=cost_delta(now_suite, before_suite),
        cost_unpriced=bool(now_suite.unpriced or before_suite.unpriced),
        baseline_verdicts=sum(1 for s in baseline.scenarios if s.status in ("passed", "failed")),
        model_changes=model_changes(current, baseline)
        + inference_class_change(current, baseline)
        + mode_change(current, baseline),
        history_runs=len(history.runs),
        latency_comparable=not mode_change(current, baseline),
    )


def same_run(current: RunResults, baseline: RunResults) -> str:
    """Why ``baseline`` records the run ``current`` is (the gated run compared with itself
    finds no regression, and its history would excuse its own failures), or "".

    A run is known by when it started and its commit: a copy of the gated file, a shard of the
    same run (a merge starts when its first shard did), or a later file whose history already
    counts this run (:func:`lkeval.results.history.rolled`) all record it."""
    meta, base = current.metadata, baseline.metadata
    if not meta.started_at:
        return ""
    run = f"started {meta.started_at}, commit {meta.git_sha or 'unknown'}"
    if base.started_at == meta.started_at and base.git_sha == meta.git_sha:
        return f"the baseline records the run it gates ({run})"
    history = baseline.history.runs if baseline.history is not None else ()
    if any(r.started_at == meta.started_at and r.git_sha == meta.git_sha for r in history):
        return f"the baseline's history already counts the run it gates ({run})"
    return ""


def _with_slipped(
    changes: list[ScenarioChange],
    now: dict[str, ScenarioResult],
    history: History,
    current: RunResults,
) -> list[ScenarioChange]:
    """``changes`` with every sequential pass that is significantly below its history marked
    (:func:`~lkeval.results.history.slipped_passes`; quarantined scenarios are not compared)."""
    compared = {}
    for change in changes:
        result = now[change.scenario_id]
        sequential = result.sampling is not None and result.sampling.mode == "sequential"
        if result.status != "passed" or not sequential or result.quarantined:
            continue
        rate = rate_of(_history_entry(history, current, result))
        if rate is not None:
            compared[change.scenario_id] = (result, rate)
    found = slipped_passes(compared)
    return [
        replace(c, history_verdict=found[c.scenario_id]) if c.scenario_id in found else c
        for c in changes
    ]


def _history_entry(
    history: History, current: RunResults, result: ScenarioResult
) -> ScenarioHistory | None:
    """The scenario's history, when its content is the one the history counted (both
    digests known and equal)."""
    if result.status == "skipped":
        return None
    digest = digests(current).get(result.scenario_id)
    return scenario_entry(history, result.scenario_id, digest)


def _metric_deltas(
    now: ScenarioResult, old: ScenarioResult | None
) -> dict[str, MetricDelta | None]:
    if old is None or now.status == "skipped" or old.status == "skipped":
        return {}
    now_metrics, old_metrics = scenario_metrics(now), scenario_metrics(old)
    return {
        "latency_p95": latency_delta(now_metrics, old_metrics),
        "cost": cost_delta(now_metrics, old_metrics),
    }


def _pass_rate(results: RunResults) -> float | None:
    # The gate's tally (lkeval.results.gate imports this module): skipped and quarantined
    # scenarios do not count.
    counted = [s for s in results.scenarios if s.status != "skipped" and not s.quarantined]
    passed = sum(1 for s in counted if s.status == "passed")
    return passed / len(counted) if counted else None


def _classify(
    current: Status, baseline: Status | None, history: HistoryVerdict | None = None
) -> ChangeKind:
    if history is not None and history.judgement == "regression":
        return "regression"
    if history is not None and history.judgement == "noise":
        return "unchanged" if baseline is not None else "new"
    if baseline is None:
        return "new"
    if baseline == "passed" and current in _BAD:
        return "regression"
    if baseline in _BAD and current == "passed":
        return "fixed"
    return "unchanged"


def _by_id(scenarios: tuple[ScenarioResult, ...]) -> dict[str, ScenarioResult]:
    # A duplicated id is a scenario-file mistake the loader reports; here the first one wins
    # so a comparison is still possible.
    found: dict[str, ScenarioResult] = {}
    for scenario in scenarios:
        found.setdefault(scenario.scenario_id, scenario)
    return found
