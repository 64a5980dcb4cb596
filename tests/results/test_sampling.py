"""The stopping rule against exact probabilities: binomial sums and a literal walk of every path
of votes (no randomness anywhere)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from lkeval.results.model import Attempt, RunMetadata, RunResults, ScenarioResult, Verdict
from lkeval.results.sampling import (
    DEFINITE_FAIL,
    DEFINITE_PASS,
    Observation,
    SequentialRule,
    describe,
    describe_fixed,
    fixed_fail_probability,
    observe,
    operating,
    recheck,
    recorded_rule,
    run_cost_line,
    suite_blocks,
)

PASS, FAIL = Observation(1, 0), Observation(0, 1)


def walk(rule: SequentialRule, good: float, error: float) -> tuple[float, float, float]:
    """(P(fail), E[attempts], E[votes]) by following the rule literally down every path: each
    conversation good or not, each vote right or not, with its exact probability."""
    totals = [0.0, 0.0, 0.0]

    def attempt(done: list[Observation], weight: float) -> None:
        before = rule.evidence(done)

        def vote(obs: Observation, if_good: float, if_bad: float) -> None:
            if obs.votes and not rule.wants_vote(before, obs):
                after = [*done, obs]
                w = weight * (good * if_good + (1 - good) * if_bad)
                totals[2] += w * obs.votes
                decided = rule.outcome(after)
                if decided == "undecided":
                    attempt(after, w)
                else:
                    totals[0] += w * (decided == "failed")
                    totals[1] += w * len(after)
                return
            vote(
                Observation(obs.pass_votes + 1, obs.fail_votes),
                if_good * (1 - error),
                if_bad * error,
            )
            vote(
                Observation(obs.pass_votes, obs.fail_votes + 1),
                if_good * error,
                if_bad * (1 - error),
            )

        vote(Observation(), 1.0, 1.0)

    attempt([], 1.0)
    return totals[0], totals[1], totals[2]


def test_one_vote_rule_is_the_binary_sprt_between_086_and_018() -> None:
    rule = SequentialRule(max_votes=1)
    assert rule.pass_rate(0.95) == pytest.approx(0.86)
    assert rule.pass_rate(0.10) == pytest.approx(0.18)
    assert rule.llr(PASS) == pytest.approx(math.log(0.18 / 0.86))
    assert rule.llr(FAIL) == pytest.approx(math.log(0.82 / 0.14))


def test_capped_at_three_the_one_vote_rule_is_exactly_two_of_three() -> None:
    # 3 passes reach the pass boundary; anything else is undecided at the cap, where 2 passes
    # and 1 fail favour fine: P(fail) is P(Binomial(3, p) < 2), for any p.
    rule = SequentialRule(max_votes=1, max_attempts=3)
    for good in (0.95, 0.5, 0.1):
        p = rule.pass_rate(good)
        assert operating(rule, good).p_fail == pytest.approx(
            fixed_fail_probability(p, 3, 2), abs=1e-15
        )
        assert fixed_fail_probability(p, 3, 2) == pytest.approx((1 - p) ** 3 + 3 * p * (1 - p) ** 2)


def test_one_vote_fine_scenario_passes_at_three_with_probability_p_cubed() -> None:
    # The only way to pass in 3 attempts is 3 passes; then the expected attempts are exact.
    rule = SequentialRule(max_votes=1, max_attempts=3)
    p = rule.pass_rate(0.95)
    ran = operating(rule, 0.95).expected_attempts
    assert ran == pytest.approx(3.0)  # no path decides before 3: 2 passes are -3.13 > -4.60
    assert describe(rule, [PASS] * 3).outcome == "passed"
    assert describe(rule, [PASS] * 2).outcome == "undecided"
    assert p**3 == pytest.approx(0.86**3)


@pytest.mark.parametrize("max_votes", [1, 2, 3])
@pytest.mark.parametrize("good", [0.95, 0.5, 0.1])
def test_dynamic_programme_equals_walking_every_path(max_votes: int, good: float) -> None:
    rule = SequentialRule(max_votes=max_votes, max_attempts=5)
    for error in (0.1, 0.03):
        op = operating(rule, good, error)
        p_fail, attempts, votes = walk(rule, good, error)
        assert op.p_fail == pytest.approx(p_fail, abs=1e-12)
        assert op.expected_attempts == pytest.approx(attempts, abs=1e-12)
        assert op.expected_votes == pytest.approx(votes, abs=1e-12)


def test_defaults_meet_the_suite_goals_exactly() -> None:
    rule = SequentialRule()
    fine, broken = operating(rule, 0.95), operating(rule, 0.10)
    assert suite_blocks(fine.p_fail, 20) <= 0.01  # a stable 20-scenario suite
    assert broken.p_fail >= 0.99  # a 90%-broken scenario is caught
    assert fine.expected_attempts < 4.0  # cheaper than the one-vote test (4.67)
    assert operating(SequentialRule(max_votes=1), 0.95).expected_attempts > 4.6


def test_a_re_asked_verdict_depends_on_the_evidence_not_its_direction() -> None:
    rule = SequentialRule()
    looks_fine, looks_broken = 0.0, rule.upper - 0.1
    assert rule.wants_vote(looks_fine, FAIL) and not rule.wants_vote(looks_fine, PASS)
    assert rule.wants_vote(looks_broken, PASS) and not rule.wants_vote(looks_broken, FAIL)
    assert rule.wants_vote(looks_fine, Observation(1, 1))  # a tie is asked again
    assert not rule.wants_vote(looks_fine, Observation(1, 2))  # at most max_votes
    assert not rule.wants_vote(looks_fine, Observation(definite=DEFINITE_FAIL))


def test_the_attempts_started_at_once_are_never_more_than_the_rule_runs() -> None:
    rule = SequentialRule(max_attempts=9)
    kinds = [PASS, FAIL, Observation(2, 1), Observation(0, 3), Observation(3, 0)]
    kinds += [Observation(definite=DEFINITE_PASS), Observation(definite=DEFINITE_FAIL)]
    seen: dict[tuple[int, ...], int] = {}

    def check(done: list[Observation]) -> int:
        key = tuple(sorted(kinds.index(o) for o in done))
        if key not in seen:
            fewest = 0
            if rule.outcome(done) == "undecided":
                fewest = min(1 + check([*done, obs]) for obs in kinds)
                assert rule.attempts_at_least(done) <= fewest
            seen[key] = fewest
        return seen[key]

    assert check([]) >= 3
    assert rule.attempts_at_least([]) == 3


def test_the_decision_is_recorded_with_its_confidence() -> None:
    rule = SequentialRule()
    passed = describe(rule, [PASS] * 3)
    assert (passed.outcome, passed.passes, passed.attempts) == ("passed", 3, 3)
    assert passed.text.startswith("passed 3 of 3 — pass rate above 0.18 at 99.")
    # its own path's confidence: even odds between fine and broken, this path's evidence
    assert passed.confidence == pytest.approx(1 / (1 + math.exp(rule.evidence([PASS] * 3))))
    assert "(a 90%-broken scenario passes this test 0.84% of the time)" in passed.text
    failed = describe(rule, [Observation(0, 2), Observation(0, 2), Observation(0, 3)])
    assert failed.outcome == "failed" and failed.judge_votes == 7
    assert failed.text.startswith("failed 0 of 3 — pass rate below 0.86 at 99.9")
    assert describe_fixed(2, 3, 3, 2).text == "passed 2 of 3 (--repeat 3 --min-pass 2)"


def test_a_pass_at_the_cap_states_its_own_paths_confidence_not_the_tests() -> None:
    """Issue 33.7: "passed 11 of 20" at the cap was "at 99.16%", the test's rate for a
    90%-broken scenario; its own attempts favour fine only about 3.6 to 1."""
    rule = SequentialRule()
    path = [PASS, FAIL] * 9 + [PASS, PASS]
    capped = describe(rule, path)
    assert (capped.outcome, capped.passes, capped.attempts) == ("passed", 11, 20)
    assert capped.confidence is not None and 0.75 < capped.confidence < 0.80
    assert capped.text.startswith("passed 11 of 20 — pass rate above 0.18 at 78% on its own")
    assert capped.text.endswith("(stopped at the cap of 20 attempts)")
    assert "99.16%" not in capped.text
    boundary = describe(rule, [PASS] * 3)
    assert boundary.confidence is not None and boundary.confidence > 0.99
    # and a failure at the cap on weak evidence says so too
    weak_fail = describe(rule, [PASS, FAIL] * 10)
    assert weak_fail.outcome == "failed" and weak_fail.confidence is not None
    assert weak_fail.confidence < 0.9 and "at 88% on its own attempts" in weak_fail.text


def test_at_the_cap_a_scenario_passes_only_when_the_evidence_favours_fine() -> None:
    rule = SequentialRule(max_votes=1, max_attempts=4)
    assert rule.outcome([PASS, FAIL, PASS, FAIL]) == "failed"  # -1.56 + 1.77 > 0 twice
    assert rule.outcome([PASS, FAIL, PASS, PASS]) == "passed"
    assert "cap of 4" in describe(rule, [PASS, FAIL, PASS, FAIL]).text


def test_fixed_k_of_n_at_the_issue_rates_blocks_a_stable_suite_in_half_the_runs() -> None:
    # The issue's figures for fixed k-of-n at 0.86 per attempt: 4-of-6 55%, 5-of-7 72%.
    assert suite_blocks(fixed_fail_probability(0.86, 6, 4), 20) == pytest.approx(0.55, abs=0.01)
    assert suite_blocks(fixed_fail_probability(0.86, 7, 5), 20) == pytest.approx(0.72, abs=0.01)


def _results(status: str, votes: list[str], rule: dict[str, float]) -> RunResults:
    attempts = tuple(
        Attempt(status="passed" if v == "pass" else "failed", verdicts=(Verdict("judge", v),))  # type: ignore[arg-type]
        for v in votes
    )
    rule_now = SequentialRule()
    seen = [o for a in attempts if (o := observe(a)) is not None]
    scenario = ScenarioResult(
        "s-1", "S 1", "G", "G", "s.yaml", 1, status,  # type: ignore[arg-type]
        attempts=attempts, sampling=describe(rule_now, seen),
    )  # fmt: skip
    meta = RunMetadata("0", None, "a.py", ("s.yaml",), "now", sampling_rule=rule)
    return RunResults(meta, (scenario,))


def test_a_recorded_pass_is_recomputed_from_its_attempts() -> None:
    honest = _results("passed", ["pass"] * 3, {"max_attempts": 20})
    assert recheck(honest) == honest
    # status edited to passed on one pass: the gate sees a failure, with what the votes give
    edited = recheck(_results("passed", ["pass"], {"max_attempts": 20}))
    (scenario,) = edited.scenarios
    assert scenario.status == "failed"
    assert scenario.reason.startswith("recorded as passed, but its attempts give: undecided")
    # error rates in the file are not read: a loose alpha cannot make one pass enough
    loose = recheck(_results("passed", ["pass"], {"alpha": 0.9, "beta": 0.9, "max_attempts": 1}))
    assert loose.scenarios[0].status == "passed"  # at max_attempts 1, one pass is a pass ...
    assert recorded_rule(_results("passed", [], {"alpha": 0.9})) == SequentialRule()  # ... only
    assert "falsely blocked in" in run_cost_line(honest)


def test_the_cost_line_never_counts_a_scenario_that_sampled_nothing() -> None:
    honest = _results("passed", ["pass"] * 3, {"max_attempts": 20})
    braked = dataclasses.replace(
        honest.scenarios[0],
        scenario_id="s-2",
        status="skipped",
        attempts=(),
        sampling=describe(SequentialRule(), []),
    )
    results = dataclasses.replace(honest, scenarios=(*honest.scenarios, braked))
    line = run_cost_line(results)
    assert "3 attempts for 1 scenarios (2 more than one each)" in line, line
    assert "-" not in line.split("(")[1].split(")")[0]
