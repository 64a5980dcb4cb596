"""How the engine runs the suite (:class:`EngineOptions`), and the run's attempt cap
(``--max-run-attempts``), checked before anything boots."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from lkeval import defaults
from lkeval.results.calibration import rule_with
from lkeval.results.sampling import SequentialRule
from lkeval.scenarios.model import Scenario, Selection

RUN_ATTEMPTS_PER_SCENARIO = defaults.RUN_ATTEMPTS_PER_SCENARIO


@dataclass(frozen=True)
class EngineOptions:
    """How the suite runs."""

    concurrency: int = field(default_factory=defaults.default_concurrency)
    repeat: int | None = None
    min_pass: int | None = None
    quarantine: tuple[tuple[str, str], ...] = ()
    selection: Selection = field(default_factory=Selection)
    max_errors: int = defaults.MAX_ERRORS  # 0: never stop early (lkeval.run.systemic)
    # scenario id -> why it has nothing to check; decided before anything boots, not played
    nothing_to_check: dict[str, str] = field(default_factory=dict)
    # The sequential test of scenarios without a fixed repeat/min_pass (lkeval.results.sampling)
    sampling: SequentialRule = field(default_factory=SequentialRule)
    # Attempts the whole run may start (None: RUN_ATTEMPTS_PER_SCENARIO per selected scenario)
    max_run_attempts: int | None = None
    # scenario id -> (content digest, judge error) from the baseline's calibration
    # (lkeval.results.calibration): that scenario's rule assumes that error, if unedited
    judge_errors: dict[str, tuple[str, float]] = field(default_factory=dict)
    # Agents are forked from the fork server (False: cold starts, each boot ~2.5 CPU-s)
    warm_starts: bool = True
    # scenario id -> (content digest, why) for each scenario whose calibration in the
    # baseline's history says the judge cannot tell good from broken (unfit_reason): its
    # judge's passes cannot pass, unless allow_weak_judge (--allow-weak-judge)
    unfit_judges: dict[str, tuple[str, str]] = field(default_factory=dict)
    allow_weak_judge: bool = False

    def rule_for(self, scenario: Scenario) -> SequentialRule:
        """The sequential test of ``scenario``: the run's, with its calibrated judge error
        when the calibration was measured on this very content."""
        calibrated = self.judge_errors.get(scenario.id)
        if calibrated is None or calibrated[0] != scenario.digest:
            return self.sampling
        return rule_with(self.sampling, calibrated[1])

    def fixed(self, scenario: Scenario) -> bool:
        """Whether ``scenario`` runs a fixed plan (its own or the run's repeat/min_pass)."""
        plan = (scenario.repeat, scenario.min_pass, self.repeat, self.min_pass)
        return any(x is not None for x in plan)


def attempts_problem(scenarios: Sequence[Scenario], options: EngineOptions) -> str | None:
    """Why the run's attempt cap cannot even start the selected scenarios (a usage error,
    checked before anything boots): fixed plans run all their attempts, and the sequential
    test needs a few per scenario before it can decide anything."""
    cap = run_attempt_cap(scenarios, options)
    fixed = [s for s in scenarios if options.fixed(s)]
    runs = sum(s.runs(options.repeat, options.min_pass)[0] for s in fixed)
    fewest = options.sampling.attempts_at_least([]) * (len(scenarios) - len(fixed))
    if runs + fewest <= cap:
        return None
    return (
        f"--max-run-attempts {cap}: the {len(scenarios)} selected scenarios need at least "
        f"{runs + fewest} attempts ({runs} fixed, {fewest} for the sequential test's first "
        "round); raise it, or select fewer (--match, --tag, --shard)"
    )


def run_attempt_cap(scenarios: Sequence[Scenario], options: EngineOptions) -> int:
    """Attempts the run may start in all (``--max-run-attempts``)."""
    if options.max_run_attempts is not None:
        return options.max_run_attempts
    return RUN_ATTEMPTS_PER_SCENARIO * max(1, len(options.selection.pick(scenarios)))


__all__ = ["RUN_ATTEMPTS_PER_SCENARIO", "EngineOptions", "attempts_problem", "run_attempt_cap"]
