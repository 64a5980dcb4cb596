"""What the gate catches at the settings in force, stated with every report.

A decision's "at 99.16%" describes one kind of scenario only: the test's ``broken`` hypothesis,
a scenario broken in 90% of its conversations. A scenario broken in 30% of them passes the
default test about 90% of the time, and a reader has to be told. So every report's headline
gives the exact chance that a scenario broken in 30%, 50%, 70% and 90% of its conversations
passes, at the settings the run used (the sequential rule, or each fixed ``--repeat``/
``--min-pass`` plan), beside the stable-suite false-block rate (``run_cost_line``). Computed by
:func:`lkeval.results.sampling.operating` (dynamic programming over every path, not simulation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lkeval.results.model import RunResults
from lkeval.results.sampling import (
    SequentialRule,
    fixed_fail_probability,
    operating,
    percent,
    rule_in_force,
    suite_blocks,
)

#: Shares of broken conversations every headline states.
BROKEN_SHARES: tuple[float, ...] = (0.30, 0.50, 0.70, 0.90)


@dataclass(frozen=True)
class Characteristics:
    """One setting's exact operating characteristics: per broken share, the chance such a
    scenario passes and its expected attempts; a fine scenario's chance to fail and attempts."""

    passes: tuple[tuple[float, float], ...]
    attempts: tuple[tuple[float, float], ...]
    fine_fails: float
    fine_attempts: float

    def suite_blocked(self, scenarios: int) -> float:
        """P(a suite of ``scenarios`` fine scenarios is blocked)."""
        return suite_blocks(self.fine_fails, scenarios)


def sequential_characteristics(
    rule: SequentialRule, shares: Sequence[float] = BROKEN_SHARES
) -> Characteristics:
    """The sequential rule's characteristics (exact)."""
    runs = [(share, operating(rule, 1 - share)) for share in shares]
    fine = operating(rule, rule.fine)
    return Characteristics(
        tuple((share, 1 - o.p_fail) for share, o in runs),
        tuple((share, o.expected_attempts) for share, o in runs),
        fine.p_fail,
        fine.expected_attempts,
    )


def fixed_characteristics(
    rule: SequentialRule, repeat: int, min_pass: int, shares: Sequence[float] = BROKEN_SHARES
) -> Characteristics:
    """A fixed ``--repeat N --min-pass M`` plan's characteristics (binomial, exact)."""

    def passes(good: float) -> float:
        return 1 - fixed_fail_probability(rule.pass_rate(good), repeat, min_pass)

    return Characteristics(
        tuple((share, passes(1 - share)) for share in shares),
        tuple((share, float(repeat)) for share in shares),
        1 - passes(rule.fine),
        float(repeat),
    )


def pass_chances(chars: Characteristics) -> str:
    """``90% / 44% / 9% / 0.84%``: the chance each broken share passes."""
    return " / ".join(percent(p) for _, p in chars.passes)


def shares_phrase(chars: Characteristics) -> str:
    """``a scenario broken in 30% / 50% / 70% / 90% of its conversations passes``."""
    broken = " / ".join(f"{share * 100:.0f}%" for share, _ in chars.passes)
    return f"a scenario broken in {broken} of its conversations passes"


def plan_lines(rule: SequentialRule, scenarios: int) -> list[str]:
    """``lkeval validate``'s plan of the sequential test at ``rule`` (``--catch``,
    ``--max-attempts``), before anything runs: per share of broken conversations, the exact
    chance to pass and the expected attempts and judge calls of one scenario; then the chance
    that ``scenarios`` fine scenarios are falsely blocked."""
    shares = (0.0, *BROKEN_SHARES)
    lines = [
        f"sequential test: catch {percent(1 - rule.broken)}-broken at {percent(1 - rule.beta)}, "
        f"at most {rule.max_attempts} attempts, judge flipping {percent(rule.judge_error)} "
        "(exact):",
        "  broken conversations | passes | expected attempts | expected judge calls",
    ]
    for share in shares:
        ran = operating(rule, rule.fine if share == 0 else 1 - share)
        name = f"{percent(1 - rule.fine)} (fine)" if share == 0 else f"{share * 100:.0f}%"
        lines.append(
            f"  {name} | {percent(1 - ran.p_fail)} | {ran.expected_attempts:.2f} | "
            f"{ran.expected_votes:.2f}"
        )
    fine = operating(rule, rule.fine).p_fail
    these, twenty = percent(suite_blocks(fine, scenarios)), percent(suite_blocks(fine, 20))
    lines.append(
        f"  a suite of these {scenarios} fine scenario(s) is falsely blocked in "
        f"{these} of runs (20: {twenty}); "
        "each attempt also makes the simulated caller's calls (one per turn)"
    )
    return lines


def sensitivity_line(results: RunResults) -> str:
    """The headline: what the gate lets through at the settings this run used, one phrase per
    plan in force (the sequential test, then each fixed plan); "" when nothing was sampled."""
    rule = rule_in_force(results)
    ran = [s for s in results.scenarios if s.sampling is not None and not s.quarantined]
    parts: list[str] = []
    if any(s.sampling is not None and s.sampling.mode == "sequential" for s in ran):
        parts.append(f"{pass_chances(sequential_characteristics(rule))} (sequential test)")
    chars = sequential_characteristics(rule)
    plans = sorted(
        {
            (s.sampling.attempts, max(1, s.min_pass))
            for s in ran
            if s.sampling is not None and s.sampling.mode == "fixed" and s.sampling.attempts
        }
    )
    for repeat, min_pass in plans[:3]:
        chars = fixed_characteristics(rule, repeat, min_pass)
        parts.append(f"{pass_chances(chars)} (--repeat {repeat} --min-pass {min_pass})")
    if not parts:
        return ""
    lead = f"sensitivity: {shares_phrase(chars)} "
    return lead + "; ".join(parts) + " of the time (exact; see docs/sampling.md)"


__all__ = [
    "BROKEN_SHARES",
    "Characteristics",
    "fixed_characteristics",
    "pass_chances",
    "plan_lines",
    "sensitivity_line",
    "sequential_characteristics",
    "shares_phrase",
]
