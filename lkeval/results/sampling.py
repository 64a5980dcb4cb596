"""The stopping rule: how many attempts a scenario gets, and how sure its verdict is.

An LLM eval is noisy twice over: the agent samples a different conversation each attempt, and
the judge flips some verdicts. One attempt per scenario blocks a stable 20-scenario suite in
most runs; fixed k-of-n spends the same attempts on scenarios that obviously pass as on the
uncertain ones. So by default each scenario runs a Wald sequential probability ratio test
(SPRT) between two hypotheses about its share of good conversations:

* fine: ``fine`` (0.95) of its conversations are good;
* broken: ``broken`` (0.10) are good (a scenario broken in 90% of its conversations).

The judge's votes are the observations. With a judge that flips ``judge_error`` (0.10) of its
verdicts both ways, one vote passes a fine scenario's attempt with probability 0.86 and a broken
one's with 0.18; a second vote on the same transcript separates the judge's noise from the
agent's (the judge is asked again about one transcript: the likelihood of an attempt's votes is
a mixture over the unseen truth of its conversation, and depends only on pass votes minus fail
votes). Which verdicts are asked again is decided by the test, not by their direction: a
vote that goes against the scenario's evidence so far (or ties) is asked again, up to
``max_votes`` per attempt; a pass in a scenario that looks broken is questioned as much as a
fail in one that looks fine.

The scenario passes when the log likelihood ratio (broken over fine) falls to
``log(beta / (1 - alpha))`` and fails when it reaches ``log((1 - beta) / alpha)``; at
``max_attempts`` it passes only if the evidence favours fine. An attempt that ended in error, or
whose outcome a scripted check decided, is a definite observation (no judge noise in it).

:func:`operating` computes the rule's exact operating characteristics (probability of a fail
decision, expected attempts and judge votes) by dynamic programming over every path of votes,
not by simulation; the defaults are chosen with it so that a stable 20-scenario suite is blocked
in at most 1% of runs and a 90%-broken scenario is caught in at least 99% (``docs/sampling.md``).
Pure functions over data: the engine feeds observations in attempt order, and ``lkeval report``
recomputes every decision from a results file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

from lkeval.results.model import Attempt, RunResults, Sampling, ScenarioResult

Outcome = Literal["passed", "failed", "undecided"]

#: An attempt's net judge vote (pass votes minus fail votes), or a definite outcome.
DEFINITE_PASS = "pass"
DEFINITE_FAIL = "fail"


@dataclass(frozen=True)
class Observation:
    """What one attempt says about its scenario: the judge's votes on its transcript, or a
    definite outcome (``definite`` is "pass"/"fail": a scripted check or an error decided)."""

    pass_votes: int = 0
    fail_votes: int = 0
    definite: str = ""

    @property
    def net(self) -> int:
        """Pass votes minus fail votes (what the likelihood depends on)."""
        return self.pass_votes - self.fail_votes

    @property
    def votes(self) -> int:
        """Judge votes asked about this attempt."""
        return self.pass_votes + self.fail_votes

    @property
    def passed(self) -> bool:
        """The attempt's own verdict: a definite pass, or more pass votes than fail votes."""
        return self.definite == DEFINITE_PASS or (not self.definite and self.net > 0)


@dataclass(frozen=True)
class SequentialRule:
    """The sequential test's parameters (see the module docstring); frozen so its exact
    operating characteristics are computed once per rule."""

    fine: float = 0.95
    broken: float = 0.10
    judge_error: float = 0.10
    alpha: float = 0.0005
    beta: float = 0.01
    max_attempts: int = 20
    max_votes: int = 3

    @property
    def upper(self) -> float:
        """The log likelihood ratio at which the scenario fails."""
        return math.log((1 - self.beta) / self.alpha)

    @property
    def lower(self) -> float:
        """The log likelihood ratio at which the scenario passes."""
        return math.log(self.beta / (1 - self.alpha))

    def pass_rate(self, good: float, votes: int = 1) -> float:
        """An attempt's chance to pass on ``votes`` (odd) votes when ``good`` of conversations
        are good: 0.86 for a fine scenario and 0.18 for a broken one at one vote."""
        right = _majority_right(self.judge_error, votes)
        return good * right + (1 - good) * (1 - right)

    def llr(self, obs: Observation) -> float:
        """This observation's log likelihood ratio, broken over fine."""
        if obs.definite == DEFINITE_PASS:
            return math.log(self.broken / self.fine)
        if obs.definite == DEFINITE_FAIL:
            return math.log((1 - self.broken) / (1 - self.fine))
        return _net_llr(self.broken, self.fine, self.judge_error, obs.net)

    def evidence(self, observations: Sequence[Observation]) -> float:
        """The log likelihood ratio of a scenario's observations so far."""
        return sum(self.llr(o) for o in observations)

    def wants_vote(self, before: float, obs: Observation) -> bool:
        """Ask the judge again about this attempt? ``before`` is the evidence of the attempts
        before it. Yes while its votes tie or go against where the evidence leans (the middle
        of the two boundaries), up to ``max_votes``."""
        if obs.definite or obs.votes >= self.max_votes:
            return False
        leans_fail = before >= (self.upper + self.lower) / 2
        return obs.net == 0 or (obs.net > 0) == leans_fail

    def outcome(self, observations: Sequence[Observation]) -> Outcome:
        """passed / failed once a boundary (or the cap) is reached, else undecided."""
        value = self.evidence(observations)
        if value >= self.upper:
            return "failed"
        if value <= self.lower:
            return "passed"
        if len(observations) >= self.max_attempts:
            return "failed" if value >= 0 else "passed"
        return "undecided"

    def attempts_at_least(self, observations: Sequence[Observation]) -> int:
        """Attempts this scenario will certainly still run (0 when decided): the fewest that
        could reach a boundary. Starting that many at once runs nothing the one-at-a-time rule
        would not, so the decision is the same whatever the concurrency."""
        if self.outcome(observations) != "undecided":
            return 0
        value = self.evidence(observations)
        steps = [
            self.llr(Observation(*_votes_of(n))) for n in range(-self.max_votes, self.max_votes + 1)
        ]
        most = max(self.llr(Observation(definite=DEFINITE_FAIL)), *steps)
        least = min(self.llr(Observation(definite=DEFINITE_PASS)), *steps)
        to_fail = math.ceil((self.upper - value) / most - 1e-12)
        to_pass = math.ceil((value - self.lower) / -least - 1e-12)
        left = self.max_attempts - len(observations)
        return max(1, min(to_fail, to_pass, left))


def _majority_right(error: float, votes: int) -> float:
    need = votes // 2 + 1
    return sum(
        math.comb(votes, k) * (1 - error) ** k * error ** (votes - k)
        for k in range(need, votes + 1)
    )


def _net_likelihood(good: float, error: float, net: int) -> float:
    """P(votes with this net | share ``good`` of good conversations), up to a factor that
    does not depend on ``good`` (it cancels in the ratio)."""
    d = abs(net)
    agree, disagree = (1 - error) ** d, error**d
    if net >= 0:
        return good * agree + (1 - good) * disagree
    return good * disagree + (1 - good) * agree


def _net_llr(broken: float, fine: float, error: float, net: int) -> float:
    return math.log(_net_likelihood(broken, error, net) / _net_likelihood(fine, error, net))


# --- exact operating characteristics ----------------------------------------------------------


@dataclass(frozen=True)
class Operating:
    """The rule's exact behaviour on a scenario with ``good`` share of good conversations and a
    judge flipping ``judge_error`` of its verdicts."""

    good: float
    judge_error: float
    p_fail: float
    expected_attempts: float
    expected_votes: float
    p_cap: float


@lru_cache(maxsize=256)
def operating(rule: SequentialRule, good: float, judge_error: float | None = None) -> Operating:
    """Exact operating characteristics by dynamic programming over every path of votes.

    The state after each attempt is how many attempts ended on each net vote (the evidence is
    a function of it, exactly); each attempt's votes follow :meth:`SequentialRule.wants_vote`.
    """
    error = rule.judge_error if judge_error is None else judge_error
    # Per attempt, where its votes end depends only on where the evidence leans before it.
    ends = {lean: _attempt_outcomes(rule, lean, good, error) for lean in (False, True)}
    middle = (rule.upper + rule.lower) / 2
    # state: attempts ended on each net vote (sorted) -> (probability, evidence)
    states: dict[tuple[int, ...], tuple[float, float]] = {(): (1.0, 0.0)}
    p_fail = attempts = votes = p_cap = 0.0
    for n in range(1, rule.max_attempts + 1):
        nxt: dict[tuple[int, ...], tuple[float, float]] = {}
        for key, (weight, value) in states.items():
            for obs, prob in ends[value >= middle]:
                w = weight * prob
                votes += w * obs.votes
                end = value + rule.llr(obs)
                if rule.lower < end < rule.upper and n < rule.max_attempts:
                    path = tuple(sorted((*key, obs.net)))
                    nxt[path] = (nxt.get(path, (0.0, 0.0))[0] + w, end)
                    continue
                attempts += w * n
                failed = end >= rule.upper or (end > rule.lower and end >= 0)
                p_fail += w * failed
                p_cap += w * (rule.lower < end < rule.upper)
        states = nxt
    return Operating(good, error, p_fail, attempts, votes, p_cap)


def _votes_of(net: int) -> tuple[int, int]:
    return (net, 0) if net >= 0 else (0, -net)


def _attempt_outcomes(
    rule: SequentialRule, leans_fail: bool, good: float, error: float
) -> list[tuple[Observation, float]]:
    """Every way one attempt's votes can end, with its probability (the conversation is good
    with probability ``good``; each vote is right with probability ``1 - error``)."""
    before = rule.upper if leans_fail else rule.lower
    out: dict[tuple[int, int], float] = {}

    def walk(p: int, f: int, if_good: float, if_bad: float) -> None:
        obs = Observation(p, f)
        if obs.votes and not rule.wants_vote(before, obs):
            out[(p, f)] = out.get((p, f), 0.0) + good * if_good + (1 - good) * if_bad
            return
        walk(p + 1, f, if_good * (1 - error), if_bad * error)
        walk(p, f + 1, if_good * error, if_bad * (1 - error))

    walk(0, 0, 1.0, 1.0)
    return [(Observation(p, f), prob) for (p, f), prob in out.items()]


def fixed_fail_probability(pass_rate: float, repeat: int, min_pass: int) -> float:
    """P(a scenario fails ``--repeat N --min-pass M``): fewer than M of N attempts pass."""
    return sum(
        math.comb(repeat, k) * pass_rate**k * (1 - pass_rate) ** (repeat - k)
        for k in range(0, min(min_pass, repeat + 1))
    )


def suite_blocks(p_fail: float, scenarios: int) -> float:
    """P(a suite of independent scenarios, each failing with ``p_fail``, is blocked)."""
    return 1 - (1 - p_fail) ** scenarios


# --- the decision, as recorded ---------------------------------------------------------------


def path_confidence(rule: SequentialRule, value: float, outcome: Outcome) -> float:
    """How sure this decision is on its own attempts: the probability of the hypothesis it
    chose, given this scenario's own evidence ``value`` (log likelihood ratio, broken over
    fine) with even odds between fine and broken. A pass at the boundary is about 99%; a pass
    at the cap on weak evidence ("11 of 20") says how weak it is, not the test's 99.16%."""
    toward = -value if outcome == "passed" else value
    return 1 / (1 + math.exp(-max(-700.0, min(700.0, toward))))


def describe(rule: SequentialRule, observations: Sequence[Observation]) -> Sampling:
    """The recorded decision of a scenario's observations (in attempt order): its confidence
    is its own path's (:func:`path_confidence`); the test's rates for the hypothesis it rejected
    follow in brackets."""
    outcome = rule.outcome(observations)
    passes = sum(1 for o in observations if o.passed)
    n = len(observations)
    votes = sum(o.votes for o in observations)
    value = rule.evidence(observations)
    head = f"{'passed' if outcome == 'passed' else 'failed'} {passes} of {n}"
    confidence: float | None = None
    if outcome == "failed":
        confidence = path_confidence(rule, value, outcome)
        text = (
            f"{head} — pass rate below {rule.pass_rate(rule.fine):.2f} "
            f"at {_pct(confidence)} on its own attempts (a fine scenario fails this test "
            f"{_pct(operating(rule, rule.fine).p_fail)} of the time)"
        )
    elif outcome == "passed":
        confidence = path_confidence(rule, value, outcome)
        text = (
            f"{head} — pass rate above {rule.pass_rate(rule.broken):.2f} "
            f"at {_pct(confidence)} on its own attempts (a {_pct(1 - rule.broken)}-broken "
            f"scenario passes this test {_pct(1 - operating(rule, rule.broken).p_fail)} "
            "of the time)"
        )
    else:
        text = f"undecided after {passes} of {n} passed"
    if outcome != "undecided" and n >= rule.max_attempts and rule.lower < value < rule.upper:
        text += f" (stopped at the cap of {rule.max_attempts} attempts)"
    calibrated = rule.judge_error if rule.judge_error != SequentialRule.judge_error else None
    return Sampling(
        "sequential",
        outcome,
        passes,
        n,
        votes,
        round(value, 6),
        confidence,
        text,
        judge_error=calibrated,
    )


def describe_fixed(passes: int, ran: int, repeat: int, min_pass: int) -> Sampling:
    """The recorded decision of ``--repeat N --min-pass M``."""
    outcome = "passed" if passes >= min_pass else "failed"
    text = f"{outcome} {passes} of {ran} (--repeat {repeat} --min-pass {min_pass})"
    return Sampling("fixed", outcome, passes, ran, text=text)


def percent(x: float) -> str:
    """A share as the reports print it (:func:`_pct`)."""
    return _pct(x)


def _pct(x: float) -> str:
    """A percentage with the digits that matter near 0% or 100% (99.97%, 0.03%)."""
    value = 100 * x
    edge = min(value, 100 - value)
    if edge >= 1 or edge <= 0:
        return f"{value:.0f}%"
    return f"{value:.{1 - math.floor(math.log10(edge))}f}%"


# --- from attempts ---------------------------------------------------------------------------

JUDGE_SOURCE = "judge"


def judge_votes(attempt: Attempt) -> tuple[int, int] | None:
    """(pass votes, fail votes) of the conversation judge when the attempt's outcome hangs on
    it alone (every other verdict passed, nothing else went wrong); None otherwise."""
    if attempt.status not in ("passed", "failed"):
        return None
    judged = [v for v in attempt.verdicts if v.source == JUDGE_SOURCE]
    others = [v for v in attempt.verdicts if v.source != JUDGE_SOURCE]
    if len(judged) != 1 or any(v.verdict != "pass" for v in others):
        return None
    votes = judged[0].votes or (judged[0].verdict,)
    if any(v not in ("pass", "fail") for v in votes):
        return None  # a "maybe" is settled by --maybe-is-pass, not counted as a vote
    passed = sum(1 for v in votes if v == "pass")
    if (passed > len(votes) - passed) != (attempt.status == "passed"):
        return None  # the status says otherwise (e.g. a veto): it is definite
    return passed, len(votes) - passed


def judge_passed(attempt: Attempt) -> bool:
    """Whether the conversation judge's verdict on this attempt is a pass (what a paired
    control and a calibration check, ``lkeval.run.engine``)."""
    return any(v.source == JUDGE_SOURCE and v.verdict == "pass" for v in attempt.verdicts)


def observe(attempt: Attempt) -> Observation | None:
    """What an attempt says for the stopping rule: its judge votes when the judge alone decided
    it, else a definite pass or fail (an error never helps a scenario pass); None when it was
    skipped (it says nothing)."""
    if attempt.status == "skipped":
        return None
    votes = judge_votes(attempt)
    if votes is not None:
        return Observation(*votes)
    return Observation(definite=DEFINITE_PASS if attempt.status == "passed" else DEFINITE_FAIL)


def run_cost_line(results: RunResults) -> str:
    """The headline of a run's sampling: attempts and judge votes beyond one per scenario, and
    the chance that this run's plan blocks a suite whose scenarios are all fine (at the rates
    of ``SequentialRule``: judge flipping 10%, agent failing 5% on its own); "" when no
    scenario ran."""
    rule = rule_in_force(results)
    # A scenario whose attempts were all skipped (the error brake) sampled nothing: counted,
    # it made "(-1 more than one each)".
    ran = [s for s in results.scenarios if s.sampling is not None and s.sampling.attempts > 0]
    if not ran:
        return ""
    attempts = sum(s.sampling.attempts for s in ran if s.sampling)
    votes = sum(s.sampling.judge_votes for s in ran if s.sampling)
    clean = 1.0
    for s in ran:
        if s.quarantined or s.sampling is None:
            continue
        if s.sampling.mode == "sequential":
            clean *= 1 - operating(rule, rule.fine).p_fail
        else:
            n = max(1, s.sampling.attempts)
            clean *= 1 - fixed_fail_probability(rule.pass_rate(rule.fine), n, s.min_pass)
    extra = attempts - len(ran)
    return (
        f"sampling: {attempts} attempts for {len(ran)} scenarios ({extra} more than one each), "
        f"{votes} judge votes; a suite of fine scenarios run this way is falsely blocked in "
        f"{_pct(1 - clean)} of runs (judge flipping {_pct(rule.judge_error)}, see "
        "docs/sampling.md)"
    )


def recorded_rule(results: RunResults) -> SequentialRule:
    """The rule a results file was decided with. Only its cap is taken from the file (bounded):
    error rates read from a file a pull request could have written would let it pass itself."""
    cap = results.metadata.sampling_rule.get("max_attempts")
    if isinstance(cap, int) and 1 <= cap <= 1_000:
        return SequentialRule(max_attempts=cap)
    return SequentialRule()


def rule_in_force(results: RunResults) -> SequentialRule:
    """The rule a results file records, its sensitivity (``--catch``: ``broken``, ``beta``)
    included, each held within its bounds. For the file's own consistency and the figures the
    reports show; the gate re-decides with the rule of its own flags (:func:`recheck`)."""
    rule, record = recorded_rule(results), results.metadata.sampling_rule
    broken, beta = record.get("broken"), record.get("beta")
    if isinstance(broken, (int, float)) and 0 < broken < rule.fine:
        rule = replace(rule, broken=float(broken))
    if isinstance(beta, (int, float)) and 0 < beta <= 0.5:
        rule = replace(rule, beta=float(beta))
    return rule


def replay(rule: SequentialRule, scenario: ScenarioResult) -> Sampling:
    """The sequential decision a scenario's recorded attempts give, recomputed from their
    votes (``lkeval report`` trusts no recorded outcome)."""
    return describe(rule, [o for a in scenario.attempts if (o := observe(a)) is not None])


def recheck(
    results: RunResults,
    judge_errors: Mapping[str, float] | None = None,
    rule: SequentialRule | None = None,
) -> RunResults:
    """Every sequential pass recomputed from its recorded attempts: a scenario recorded as
    passed whose attempts do not pass the test (an edited file, or a bug) gates as failed.
    ``judge_errors`` (scenario id -> error) are the calibrated rates of a trusted baseline; the
    file's own record of them is never used here. ``rule``: the sensitivity the gate runs
    with (``--catch``), with the file's cap; without it the default rule with the file's cap."""
    base = rule or recorded_rule(results)
    errors = judge_errors or {}
    scenarios = []
    for scenario in results.scenarios:
        sampling = scenario.sampling
        rule = base
        if scenario.scenario_id in errors:
            rule = replace(base, judge_error=errors[scenario.scenario_id])
        if scenario.status == "passed" and sampling is not None and sampling.mode == "sequential":
            again = replay(rule, scenario)
            if again.outcome != "passed":
                scenario = replace(
                    scenario,
                    status="failed",
                    reason=f"recorded as passed, but its attempts give: {again.text}",
                    sampling=again,
                )
        scenarios.append(scenario)
    return replace(results, scenarios=tuple(scenarios))
