"""How far the gate can be trusted with a noisy judge: false blocks of a stable agent, and the
catch rate of a real regression, through the real CLI.

    python bench/verdict_trust.py [--runs 10] [--scenarios 20] [--flip 0.1] [--agent-fail 0.05]
                                  [--fail-rate 0.9] [--only NAME]

Setup (nothing reaches the internet): the local scripted LLM server plays the agent's LLM and
the judge, and flips ``--flip`` of the judge's pass/fail verdicts at random (its
``noisy_verdicts`` quirk). The agent (bench/agents/verdict_agent.py) fails ``--agent-fail`` of
its conversations on its own (the issue's 5%), except in the ``--regressed`` scenarios of a
regressed suite, where it is broken in ``--fail-rate`` of its conversations (several regressed
scenarios per suite measure their rate faster; the catch rate is stated for one). Each
conversation's truth is known, so besides the gate's exit code every verdict can be scored.

For each configuration (the defaults: the sequential test; ``--repeat 1``, one attempt each as
lk-eval did before it; and ``--repeat 3 --min-pass 2 --rejudge 2``) it runs the suite ``--runs``
times with the stable agent and ``--runs`` times with the regressed one, and
prints:

* measured, per suite run: how often the gate blocked (with a 95% Clopper-Pearson interval);
* measured, per conversation: how often a fine conversation was failed (``q``) and a broken
  one's scenario run passed (``p``), pooled over every run of the configuration;
* derived from those per-conversation rates (the suite rates are a function of them, repeat and
  min-pass): the false-block rate of the 20-scenario suite and the catch rate, with the upper /
  lower bound from the rates' 95% intervals, which is what bounds the figures with far fewer
  CPU-seconds than thousands of suite runs would;
* for the sequential test: whether the CLI decided every scenario exactly as the rule
  prescribes (its recorded votes replayed: votes asked, attempts run, outcome); its exact
  operating characteristics (``lkeval.results.sampling.operating``) at the stated rates, which
  with that check prove the goals ("proven: YES" also needs each measured rate's 95% interval
  to hold its stated value); the margins of rates within which the goals hold; and the same
  figures at the measured rates, bounded at their 95% ends (the bench's own sampling noise);
* LLM calls (agent, judge) per stable suite run, against ``--repeat 1`` (one plain pass);
* the smallest ``--repeat N --min-pass M`` that would reach the goals (false blocks <= 1% of
  suite runs, regressions caught >= 99%) at the measured rates.

CPU: every conversation is one forked agent (~0.5 CPU-s with lk-eval and the LLM server);
`--runs 10` is 40 suite runs, 1,600 conversations, ~11 min wall at concurrency 4 here.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as `python bench/verdict_trust.py` from a checkout
    sys.path.insert(0, str(ROOT))

from lkeval.results.model import results_from_dict  # noqa: E402
from lkeval.results.sampling import Observation, SequentialRule, observe, operating  # noqa: E402
from lkeval.results.sampling import suite_blocks as rule_suite_blocks  # noqa: E402
from lkeval.testing.llm_server import LLMServer  # noqa: E402

AGENT = ROOT / "bench" / "agents" / "verdict_agent.py"
MARK = "ZX-REGRESSED"
GOAL_FALSE_BLOCK = 0.01
GOAL_CATCH = 0.99


def _verdict(value: str, why: str) -> dict[str, object]:
    return {"name": "submit_verdict", "arguments": {"verdict": value, "reasoning": why}}


RULES: list[dict[str, Any]] = [
    {"model": "bench-agent", "system": "Greet the caller", "text": "Hello, this is the desk."},
    {"model": "bench-agent", "system": "MODE broken", "text": f"{MARK}: I cannot help you."},
    {"model": "bench-agent", "text": "Sure, I can help you with your booking."},
    {
        "model": "judge",
        "has_tool": "submit_verdict",
        "last_user": MARK,
        "tool_calls": [_verdict("fail", "The agent refused to help.")],
    },
    # lk-eval's judge preflight: the known-bad canary (the agent refuses to help) fails
    {
        "model": "judge",
        "has_tool": "submit_verdict",
        "last_user": "I can't help with that",
        "tool_calls": [_verdict("fail", "The agent did not say when the shop opens.")],
    },
    {
        "model": "judge",
        "has_tool": "submit_verdict",
        "tool_calls": [_verdict("pass", "The agent offered to help.")],
    },
]

CONFIGS = {
    "defaults": [],
    "repeat 1": ["--repeat", "1"],
    "repeat 3, min-pass 2, rejudge 2": ["--repeat", "3", "--min-pass", "2", "--rejudge", "2"],
}


@dataclass
class Tally:
    """What one configuration and one agent did over its suite runs."""

    runs: int = 0
    blocked: int = 0
    exit_codes: dict[int, int] = field(default_factory=dict)
    regressed_scenarios: int = 0  # regressed scenarios over the suite runs ...
    regressed_failed: int = 0  # ... and how many of them were reported failed
    # per scenario run (attempt), by truth: fine conversations failed / broken ones passed
    fine: int = 0
    fine_failed: int = 0
    broken_scenario_runs: int = 0
    broken_scenario_passed: int = 0
    seconds: float = 0.0
    # judge votes scored against each conversation's truth; conversations of stable scenarios
    votes: int = 0
    votes_wrong: int = 0
    stable_conversations: int = 0
    stable_broken: int = 0
    regressed_conversations: int = 0
    regressed_broken: int = 0
    attempts: int = 0
    calls: dict[str, int] = field(default_factory=dict)  # LLM requests by model
    # sequential runs: scenarios decided exactly as the rule prescribes (votes asked, attempts
    # run, outcome), and the first few that were not
    decided: int = 0
    as_prescribed: int = 0
    deviations: list[str] = field(default_factory=list)


def suite(path: Path, n: int, regressed: int, fail_rate: float, agent_fail: float) -> None:
    """``n`` one-turn scripted scenarios judged on agent_expectations; the first ``regressed``
    of them are broken in ``fail_rate`` of their conversations, the others in ``agent_fail``."""
    lines = ["name: Verdict trust", "scenarios:"]
    for i in range(n):
        rate = fail_rate if i < regressed else agent_fail
        lines += [
            f"  - id: SCN_trust{i:02d}",
            f"    label: Helps caller {i:02d}",
            "    agent_expectations: The agent offers to help with the booking.",
            f"    userdata: {{fail_rate: {rate}}}",
            "    turns:",
            "      - user: Hello, can you help me with a booking?",
        ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def run_suite(
    work: Path, llm: LLMServer, flags: list[str], regressed: bool, args: argparse.Namespace
) -> tuple[int, dict[str, object]]:
    """One suite run through the real CLI; (exit code, results)."""
    work.mkdir(parents=True, exist_ok=True)
    scenarios = work / "scenarios.yaml"
    regressed_n = args.regressed if regressed else 0
    suite(scenarios, args.scenarios, regressed_n, args.fail_rate, args.agent_fail)
    results = work / "results.json"
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "OPENAI_", "LKEVAL_"))
    }
    env.update(OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="bench-key-not-secret")
    cmd = [
        sys.executable, "-m", "lkeval", "run", "--agent", str(AGENT),
        "--scenarios", str(scenarios), "--results", str(results), "--no-github",
        "--judge-model", "judge", "--concurrency", str(args.concurrency), *flags,
    ]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=work, timeout=900)
    if not results.exists():
        raise SystemExit(f"lkeval wrote no results (exit {proc.returncode}):\n{proc.stderr}")
    return proc.returncode, json.loads(results.read_text(encoding="utf-8"))


def score(tally: Tally, code: int, results: dict[str, object], regressed: int) -> None:
    """Add one suite run: the gate, and every scenario run scored against its truth."""
    check_conformance(tally, results)
    tally.runs += 1
    tally.blocked += code != 0
    tally.exit_codes[code] = tally.exit_codes.get(code, 0) + 1
    for scenario in results["scenarios"]:  # type: ignore[attr-defined]
        is_regressed = int(scenario["scenario_id"].removeprefix("SCN_trust")) < regressed
        if is_regressed:
            tally.regressed_scenarios += 1
            tally.regressed_failed += scenario["status"] != "passed"
        for attempt in scenario["attempts"]:
            passed = attempt["status"] == "passed"
            broken = any(MARK in (item.get("text") or "") for item in attempt["transcript"])
            if is_regressed:
                tally.broken_scenario_runs += 1
                tally.broken_scenario_passed += passed
            elif not broken:
                tally.fine += 1
                tally.fine_failed += not passed
            tally.attempts += 1
            if is_regressed:
                tally.regressed_conversations += 1
                tally.regressed_broken += broken
            else:
                tally.stable_conversations += 1
                tally.stable_broken += broken
            for verdict in attempt["verdicts"]:
                if verdict["source"] == "judge":
                    votes = verdict["votes"] or [verdict["verdict"]]
                    tally.votes += len(votes)
                    tally.votes_wrong += sum(1 for v in votes if (v == "pass") == broken)


def prescribed(rule: SequentialRule, status: str, votes: list[list[str]]) -> str:
    """ "" when a sequential scenario's attempts (each its judge votes in the order asked) are
    exactly what the rule prescribes: each attempt asked again while :meth:`wants_vote` says
    so and no more, every attempt but the last left the test undecided, and the last decided
    it as recorded; else what differs."""
    seen: list[Observation] = []
    for n, ballot in enumerate(votes, 1):
        if rule.outcome(seen) != "undecided":
            return f"attempt {n} ran after the test was decided ({rule.outcome(seen)})"
        before, obs = rule.evidence(seen), Observation()
        for k, vote in enumerate(ballot):
            if k and not rule.wants_vote(before, obs):
                return f"attempt {n}: vote {k + 1} asked though the rule did not want it"
            obs = Observation(obs.pass_votes + (vote == "pass"), obs.fail_votes + (vote != "pass"))
        if rule.wants_vote(before, obs):
            return f"attempt {n}: {obs.votes} votes, the rule wanted another"
        seen.append(obs)
    outcome = rule.outcome(seen)
    return "" if outcome == status else f"recorded {status}, the rule decides {outcome}"


def check_conformance(tally: Tally, raw: dict[str, object]) -> None:
    """Replay every sequential scenario's recorded votes through the rule (see
    :func:`prescribed`); the exact operating characteristics hold for the gate only if the
    CLI decided every scenario this way. Attempts that are not pure judge votes (an error, a
    veto) are left out of the check: the bench's agent produces none."""
    results = results_from_dict(raw)
    rule = SequentialRule()
    for scenario in results.scenarios:
        if scenario.sampling is None or scenario.sampling.mode != "sequential":
            continue
        ballots: list[list[str]] = []
        for attempt in scenario.attempts:
            obs = observe(attempt)
            judged = [v for v in attempt.verdicts if v.source == "judge"]
            if obs is None or obs.definite or len(judged) != 1:
                ballots = []
                break
            ballots.append(list(judged[0].votes or (judged[0].verdict,)))
        if not ballots:
            continue
        tally.decided += 1
        why = prescribed(rule, scenario.status, ballots)
        tally.as_prescribed += not why
        if why and len(tally.deviations) < 5:
            tally.deviations.append(f"{scenario.scenario_id}: {why}")


# --- statistics ------------------------------------------------------------------------------


def binom_tail_ge(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), in log space (n runs into the thousands)."""
    if p <= 0.0:
        return 1.0 if k <= 0 else 0.0
    if p >= 1.0:
        return 1.0 if k <= n else 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    total = 0.0
    for i in range(max(k, 0), n + 1):
        log_c = math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
        total += math.exp(log_c + i * log_p + (n - i) * log_q)
    return min(total, 1.0)


def clopper_pearson(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Exact 95% interval of a binomial rate, by bisection on the binomial tails."""
    if n == 0:
        return 0.0, 1.0

    def solve(f: object, target: float) -> float:
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            if f(mid) > target:  # type: ignore[operator]
                hi = mid
            else:
                lo = mid
        return (lo + hi) / 2

    low = 0.0 if k == 0 else solve(lambda p: binom_tail_ge(k, n, p), alpha / 2)
    high = 1.0 if k == n else 1 - solve(lambda q: binom_tail_ge(n - k, n, q), alpha / 2)
    return low, high


def scenario_fails(pass_rate: float, repeat: int, min_pass: int) -> float:
    """P(a scenario is reported failed): fewer than ``min_pass`` of ``repeat`` runs passed."""
    return 1 - binom_tail_ge(min_pass, repeat, pass_rate)


def suite_blocks(q: float, n: int, repeat: int, min_pass: int) -> float:
    """P(the gate blocks a stable suite of n scenarios), per-run false-fail rate q."""
    return 1 - (1 - scenario_fails(1 - q, repeat, min_pass)) ** n


def catch(p: float, q: float, n: int, repeat: int, min_pass: int) -> float:
    """P(the gate blocks a suite with one regressed scenario): it fails, or another does."""
    missed = (1 - scenario_fails(p, repeat, min_pass)) * (
        1 - suite_blocks(q, n - 1, repeat, min_pass)
    )
    return 1 - missed


def cheapest_plan(p: float, q: float, n: int) -> tuple[int, int] | None:
    """The smallest (repeat, min_pass) reaching both goals at rates (p, q)."""
    for repeat in range(1, 26):
        for min_pass in range(1, repeat + 1):
            if suite_blocks(q, n, repeat, min_pass) <= GOAL_FALSE_BLOCK and (
                1 - scenario_fails(p, repeat, min_pass) <= 1 - GOAL_CATCH
            ):
                return repeat, min_pass
    return None


def pct(x: float) -> str:
    return f"{100 * x:5.1f}%" if x >= 0.001 or x == 0 else f"{100 * x:.3f}%"


# --- the bench -------------------------------------------------------------------------------


def plan_of(flags: list[str]) -> tuple[int, int]:
    repeat = int(flags[flags.index("--repeat") + 1]) if "--repeat" in flags else 1
    min_pass = int(flags[flags.index("--min-pass") + 1]) if "--min-pass" in flags else repeat
    return repeat, min_pass


def rate(k: int, n: int) -> tuple[float, float, float]:
    """(estimate, 95% low, 95% high) of a binomial rate."""
    low, high = clopper_pearson(k, n)
    return k / max(1, n), low, high


def goals_hold(
    rule: SequentialRule, n: int, fine_good: float, broken_good: float, error: float
) -> bool:
    """Both goals, exactly, at these rates: a stable n-scenario suite blocked in <= 1% of runs
    and a scenario with ``broken_good`` good conversations caught in >= 99%."""
    fine = operating(rule, fine_good, error)
    broken = operating(rule, broken_good, error)
    return rule_suite_blocks(fine.p_fail, n) <= GOAL_FALSE_BLOCK and broken.p_fail >= GOAL_CATCH


def margin(ok: object, nominal: float) -> float:
    """The largest rate from ``nominal`` up at which ``ok(rate)`` still holds (bisection;
    ``ok`` is monotone: more errors only hurt)."""
    lo, hi = nominal, min(1.0, nominal + 0.2)
    if not ok(lo):  # type: ignore[operator]
        return float("nan")
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)  # type: ignore[operator]
    return lo


def report_sequential(stable: Tally, regressed: Tally, args: argparse.Namespace) -> None:
    """The sequential test's figures, and what proves the goals.

    The goals are stated at given rates (the judge flipping ``--flip``, the agent failing
    ``--agent-fail`` of good conversations, a regression broken in ``--fail-rate``), which
    this bench sets. At those rates the rule's exact operating characteristics give the
    false-block and catch rates; they hold for the gate when (1) the CLI decided every
    scenario exactly as the rule prescribes (checked on every scenario run: votes asked,
    attempts run, outcome) and (2) the bench delivered the stated rates (each measured rate's
    95% interval holds its nominal value). Sampling a suite run at a time cannot bound a 1%
    rate any other way: measuring it directly takes ~300 clean suite runs, and plugging the
    measured rates' 95% ends into the exact figures moves them by the bench's own sampling
    noise (the 99% catch goal sits 0.16 points from its nominal rate, so no finite run
    proves it that way). That plug-in figure and the margins are printed too.
    """
    n, rule = args.scenarios, SequentialRule()
    e, e_lo, e_hi = rate(stable.votes_wrong + regressed.votes_wrong, stable.votes + regressed.votes)
    a_k = stable.stable_broken + regressed.stable_broken
    a, a_lo, a_hi = rate(a_k, stable.stable_conversations + regressed.stable_conversations)
    r, r_lo, r_hi = rate(regressed.regressed_broken, regressed.regressed_conversations)
    decided = stable.decided + regressed.decided
    conform = stable.as_prescribed + regressed.as_prescribed
    print(
        f"  the CLI's decisions: {conform} of {decided} sequential scenario runs decided "
        "exactly as the rule prescribes (votes asked, attempts run, outcome)"
    )
    for line in (stable.deviations + regressed.deviations)[:5]:
        print(f"    NOT as prescribed: {line}")
    stated = [
        ("judge votes wrong", e, e_lo, e_hi, args.flip),
        ("stable conversations broken", a, a_lo, a_hi, args.agent_fail),
        ("regressed ones broken", r, r_lo, r_hi, args.fail_rate),
    ]
    consistent = all(lo <= nominal <= hi for _, _, lo, hi, nominal in stated)
    print(
        "  measured rates (95%): "
        + "; ".join(
            f"{what} {pct(x)} [{pct(lo)}..{pct(hi)}], stated {pct(nominal)}"
            for what, x, lo, hi, nominal in stated
        )
        + f": {'consistent' if consistent else 'NOT consistent'} with the stated rates"
    )
    fine_n = operating(rule, 1 - args.agent_fail, args.flip)
    broken_n = operating(rule, 1 - args.fail_rate, args.flip)
    half_n = operating(rule, 0.5, args.flip)
    fb_n = rule_suite_blocks(fine_n.p_fail, n)
    met = fb_n <= GOAL_FALSE_BLOCK and broken_n.p_fail >= GOAL_CATCH
    print(
        f"  exact at the stated rates, {n}-scenario suite: false blocks {pct(fb_n)} (goal <= 1%)"
        f"; a {pct(args.fail_rate)}-broken scenario caught {pct(broken_n.p_fail)} (goal >= 99%)"
        f"; a 50%-broken one {pct(half_n.p_fail)}; per fine scenario "
        f"{fine_n.expected_attempts:.2f} attempts, {fine_n.expected_votes:.2f} judge votes"
    )
    proven = met and consistent and decided > 0 and conform == decided
    print(
        f"  goals at the stated rates: {'MET' if met else 'NOT met'}; proven for this CLI: "
        f"{'YES' if proven else 'NO'} (every decision as prescribed, rates as stated)"
    )
    err_max = margin(
        lambda x: goals_hold(rule, n, 1 - args.agent_fail, 1 - args.fail_rate, x), args.flip
    )
    fail_max = margin(
        lambda x: goals_hold(rule, n, 1 - x, 1 - args.fail_rate, args.flip), args.agent_fail
    )
    print(
        f"  margins: both goals hold up to a judge erring {pct(err_max)} (agent at "
        f"{pct(args.agent_fail)}), or an agent failing {pct(fail_max)} alone (judge at "
        f"{pct(args.flip)})"
    )
    fine, fine_bound = operating(rule, 1 - a, e), operating(rule, 1 - a_hi, e_hi)
    broken, broken_bound = operating(rule, 1 - r, e), operating(rule, 1 - r_lo, e_hi)
    half, half_bound = operating(rule, 0.5, e), operating(rule, 0.5, e_hi)
    fb, fb_bound = rule_suite_blocks(fine.p_fail, n), rule_suite_blocks(fine_bound.p_fail, n)
    print(
        f"  exact at the measured rates: false blocks {pct(fb)} (<= {pct(fb_bound)} at their "
        f"95% ends); caught {pct(broken.p_fail)} (>= {pct(broken_bound.p_fail)}); 50%-broken "
        f"{pct(half.p_fail)} (>= {pct(half_bound.p_fail)})"
    )
    ran = stable.attempts / max(1, stable.runs * n)
    print(
        f"  attempts per fine scenario: measured {ran:.2f}, exact {fine.expected_attempts:.2f}; "
        f"judge votes exact {fine.expected_votes:.2f}; per {pct(args.fail_rate)}-broken "
        f"scenario {broken.expected_attempts:.2f}, 50%-broken {half.expected_attempts:.2f}"
    )


def report_calls(name: str, stable: Tally, plain: dict[str, int] | None, runs: int) -> None:
    """LLM calls per stable suite run, by model, against one plain pass (``--repeat 1``)."""
    per_run = {model: count / max(1, runs) for model, count in sorted(stable.calls.items())}
    total = sum(per_run.values())
    text = ", ".join(f"{model} {count:.1f}" for model, count in per_run.items())
    line = f"  LLM calls per stable suite run: {total:.1f} ({text})"
    if plain:
        base = sum(plain.values()) / max(1, runs)
        line += f" = {total / base:.2f}x one plain pass ({base:.1f})"
    print(line)


def report(name: str, flags: list[str], stable: Tally, regressed: Tally, n: int) -> None:
    repeat, min_pass = plan_of(flags)
    q = stable.fine_failed + regressed.fine_failed
    q_n = stable.fine + regressed.fine
    p_k, p_n = regressed.broken_scenario_passed, regressed.broken_scenario_runs
    q_hat, (q_lo, q_hi) = q / max(1, q_n), clopper_pearson(q, q_n)
    p_hat, (p_lo, p_hi) = p_k / max(1, p_n), clopper_pearson(p_k, p_n)
    fb_lo, fb_hi = clopper_pearson(stable.blocked, stable.runs)
    c_lo, c_hi = clopper_pearson(regressed.blocked, regressed.runs)
    caught = regressed.regressed_failed / max(1, regressed.regressed_scenarios)
    r_lo, r_hi = clopper_pearson(regressed.regressed_failed, regressed.regressed_scenarios)
    mode = f"repeat {repeat}, min-pass {min_pass}" if "--repeat" in flags else "sequential test"
    print(f"\n== {name}: {' '.join(flags) or '(no flags)'}  ({mode})")
    print(
        f"  measured, suite runs: stable blocked {stable.blocked}/{stable.runs} = "
        f"{pct(stable.blocked / stable.runs)} [95% {pct(fb_lo)}..{pct(fb_hi)}]; "
        f"regressed blocked {regressed.blocked}/{regressed.runs} = "
        f"{pct(regressed.blocked / regressed.runs)} [95% {pct(c_lo)}..{pct(c_hi)}]; "
        f"regressed scenarios reported failed {regressed.regressed_failed}/"
        f"{regressed.regressed_scenarios} = {pct(caught)} [95% {pct(r_lo)}..{pct(r_hi)}]"
    )
    print(f"  exit codes: stable {stable.exit_codes}, regressed {regressed.exit_codes}")
    print(
        f"  measured, scenario runs: fine conversation failed q = {q}/{q_n} = {pct(q_hat)} "
        f"[95% {pct(q_lo)}..{pct(q_hi)}]; regressed scenario run passed p = {p_k}/{p_n} = "
        f"{pct(p_hat)} [95% {pct(p_lo)}..{pct(p_hi)}]"
    )
    wall = stable.seconds + regressed.seconds
    print(f"  wall: {wall:.0f} s for {stable.runs + regressed.runs} suite runs")
    if "--repeat" not in flags:  # sequential: its figures follow (report_sequential)
        return
    fb = suite_blocks(q_hat, n, repeat, min_pass)
    fb_bound = suite_blocks(q_hi, n, repeat, min_pass)
    c = catch(p_hat, q_hat, n, repeat, min_pass)
    c_bound = catch(p_hi, q_lo, n, repeat, min_pass)
    own = 1 - scenario_fails(p_hat, repeat, min_pass)
    print(
        f"  derived, {n}-scenario suite: false blocks {pct(fb)} (<= {pct(fb_bound)}), "
        f"regression caught {pct(c)} (>= {pct(c_bound)}); the regressed scenario itself "
        f"slips through {pct(own)} of runs"
    )
    ok = fb_bound <= GOAL_FALSE_BLOCK and c_bound >= GOAL_CATCH
    print(f"  goals (false blocks <= 1%, caught >= 99%): {'MET' if ok else 'NOT met'}")
    plan = cheapest_plan(p_hat, q_hat, n)
    if plan is not None:
        print(
            f"  at these rates both goals need --repeat {plan[0]} --min-pass {plan[1]} "
            f"(false blocks {pct(suite_blocks(q_hat, n, *plan))}, regressed scenario slips "
            f"{pct(1 - scenario_fails(p_hat, *plan))})"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="suite runs per agent and config")
    parser.add_argument("--scenarios", type=int, default=20)
    parser.add_argument("--flip", type=float, default=0.1, help="judge verdicts flipped")
    parser.add_argument("--fail-rate", type=float, default=0.9, help="regressed conversations")
    parser.add_argument(
        "--agent-fail", type=float, default=0.05, help="conversations the agent fails alone"
    )
    parser.add_argument("--regressed", type=int, default=5, help="regressed scenarios a suite")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--only", choices=sorted(CONFIGS), action="append", help="a configuration (repeatable)"
    )
    parser.add_argument("--save", metavar="FILE", help="append the raw counts (JSON lines)")
    args = parser.parse_args()
    print(
        f"verdict trust: {args.scenarios} scenarios, judge flips {pct(args.flip)}; regressed "
        f"suite: {args.regressed} scenarios broken in {pct(args.fail_rate)} of their "
        f"conversations; {args.runs} suite runs per agent and configuration"
    )
    configs = {name: CONFIGS[name] for name in args.only} if args.only else CONFIGS
    if "repeat 1" in configs:  # the plain pass first: the others' calls are compared to it
        configs = {"repeat 1": configs["repeat 1"], **configs}
    plain: dict[str, int] | None = None
    with tempfile.TemporaryDirectory(prefix="verdict-trust-") as tmp:
        for index, (name, flags) in enumerate(configs.items()):
            quirks = {"noisy_verdicts": {"fraction": args.flip, "seed": args.seed + index}}
            tallies = {False: Tally(), True: Tally()}
            with LLMServer(RULES, quirks=quirks) as llm:
                for run in range(args.runs):
                    for regressed in (False, True):
                        started = time.monotonic()
                        work = Path(tmp) / f"{index}-{run}-{int(regressed)}"
                        before = len(llm.requests)
                        code, results = run_suite(work, llm, flags, regressed, args)
                        tallies[regressed].seconds += time.monotonic() - started
                        for request in llm.requests[before:]:
                            model = str(request.body.get("model"))
                            calls = tallies[regressed].calls
                            calls[model] = calls.get(model, 0) + 1
                        score(tallies[regressed], code, results, args.regressed * regressed)
                noisy = llm.quirks.noisy_verdicts
                assert noisy is not None
                print(f"\n[{name}] judge verdicts seen {noisy.seen}, flipped {noisy.flipped}")
            if args.save:  # the raw counts, to recompute the figures without rerunning
                raw = {name: {"stable": vars(tallies[False]), "regressed": vars(tallies[True])}}
                with open(args.save, "a", encoding="utf-8") as file:
                    file.write(json.dumps(raw) + "\n")
            report(name, flags, tallies[False], tallies[True], args.scenarios)
            if "--repeat" not in flags:
                report_sequential(tallies[False], tallies[True], args)
            if name == "repeat 1":
                plain = dict(tallies[False].calls)
            report_calls(name, tallies[False], plain, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
