"""How far the gate can be trusted with a noisy judge: false blocks of a stable agent, and the
catch rate of a real regression, through the real CLI.

    python bench/verdict_trust.py [--runs 10] [--minutes M] [--scenarios 20] [--flip 0.1]
        [--agent-fail 0.05] [--fail-rate 0.9] [--regressed 10] [--only NAME] [--random-flips]
    python bench/verdict_trust.py --characteristics [--catch 50%:90%] [--max-attempts 40]

``--characteristics`` runs nothing: it prints the sequential test's exact operating
characteristics (the chance a scenario broken in 0/30/50/70/90% of its conversations passes,
expected attempts and judge calls, the stable-suite false-block rate) at the defaults and at
each ``--catch`` sensitivity setting (``lkeval run --catch``), as ``lkeval validate`` does.

Setup (nothing reaches the internet): the local scripted LLM server plays the agent's LLM and
the judge, and flips exactly ``--flip`` of the judge's pass/fail verdicts (its
``noisy_verdicts`` quirk with ``exact``: of every 10 verdicts at 0.1 one, at a seeded random
place, so each verdict is flipped with probability exactly 0.1 and the run's share is exact;
``--random-flips``: each by chance, as before). The agent (bench/agents/verdict_agent.py)
fails ``--agent-fail`` of its conversations on its own (the issue's 5%), except in the first
``--regressed`` scenarios of a regressed suite, where it is broken in ``--fail-rate`` of its
conversations (several regressed scenarios per suite measure their rate faster; the catch rate
is stated for one). Each conversation's truth is known, so every verdict can be scored.

For each configuration (the defaults: the sequential test; ``--repeat 1``, one attempt each,
the plain pass the cost is compared with; ``--repeat 3 --min-pass 2 --rejudge 2``) it runs
the suite with the stable agent and with the regressed one, alternately, ``--runs`` times
each or until ``--minutes`` are spent, and prints the direct suite counts, the per-attempt
rates with 95% Clopper-Pearson intervals and, for the sequential test, the proof
(:func:`report_sequential`): the CLI decided every scenario exactly as the shipped rule
prescribes; the rates it saw, bounded; the rule's exact operating characteristics at the
bounds (false blocks of the 20-scenario suite, the catch rate of a 90%- and a 50%-broken
scenario); LLM calls per stable suite run against one plain pass, with a bound; "proven:
yes/no" per goal; the conversations the bounds would need; and stricter rules' figures.

CPU: every conversation is one forked agent (~0.5 CPU-s with lk-eval and the LLM server);
the load average is printed at each configuration's start and end.
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
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as `python bench/verdict_trust.py` from a checkout
    sys.path.insert(0, str(ROOT))

from lkeval.results.results_json import results_from_dict  # noqa: E402
from lkeval.results.sampling import Observation, SequentialRule, observe, operating  # noqa: E402
from lkeval.results.sampling import suite_blocks as rule_suite_blocks  # noqa: E402
from lkeval.testing.llm_server import LLMServer  # noqa: E402

AGENT = ROOT / "bench" / "agents" / "verdict_agent.py"
MARK = "ZX-REGRESSED"
DRAWS = "draws.log"  # the agent's own record of its conversations (VERDICT_AGENT_LOG)
GOAL_FALSE_BLOCK = 0.01
GOAL_CATCH = 0.99
CANARY = "canary"


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
    # lk-eval's judge preflight: the known-bad canary (the agent refuses to help) fails, the
    # known-good one passes; their reasoning says "canary" so the bench tells them apart
    {
        "model": "judge",
        "has_tool": "submit_verdict",
        "last_user": "I can't help with that",
        "tool_calls": [_verdict("fail", f"{CANARY}: the agent did not say when it opens.")],
    },
    {
        "model": "judge",
        "has_tool": "submit_verdict",
        "last_user": "shop opens",
        "tool_calls": [_verdict("pass", f"{CANARY}: the agent said when the shop opens.")],
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
    calls_per_run: list[int] = field(default_factory=list)  # LLM requests of each suite run
    # sequential runs: scenarios decided exactly as the rule prescribes (votes asked, attempts
    # run, outcome), and the first few that were not
    decided: int = 0
    as_prescribed: int = 0
    deviations: list[str] = field(default_factory=list)
    # fidelity: what lk-eval recorded against what the agent and the judge did. Attempts
    # checked, and those that differ from the agent's own record of its conversations (a
    # conversation missing or extra, a broken one recorded fine or back) or ended in error;
    # judge votes recorded, and those that differ from what the server answered
    attempts_checked: int = 0
    attempt_events: int = 0
    votes_checked: int = 0
    vote_events: int = 0
    fidelity_notes: list[str] = field(default_factory=list)


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
            f"    userdata: {{fail_rate: {rate}, scenario: SCN_trust{i:02d}}}",
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
    env["VERDICT_AGENT_LOG"] = str(work / DRAWS)
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


def fidelity(
    tally: Tally, work: Path, results: dict[str, Any], answers: list[tuple[str, str, str]]
) -> None:
    """Check one suite run's record against the agent's and the server's: every scenario's
    attempts and broken ones equal the conversations the agent logged and the broken ones it
    drew; an attempt in error is an event (a definite fail the rule's model has no room for);
    the recorded judge votes, by the truth of their transcript, equal what the server sent
    (the preflight's canary verdicts, told apart by their reasoning, left out)."""
    logged: Counter[tuple[str, str]] = Counter()
    draws = work / DRAWS
    if draws.exists():
        for line in draws.read_text(encoding="utf-8").splitlines():
            sid, _, mode = line.partition(" ")
            logged[(sid, mode)] += 1
    recorded: Counter[tuple[str, str]] = Counter()
    voted: Counter[tuple[str, str]] = Counter()
    for scenario in results["scenarios"]:
        sid = scenario["scenario_id"]
        for attempt in scenario["attempts"]:
            broken = any(MARK in (item.get("text") or "") for item in attempt["transcript"])
            recorded[(sid, "broken" if broken else "fine")] += 1
            tally.attempts_checked += 1
            if attempt["status"] == "error":
                tally.attempt_events += 1
                note(tally, f"{sid}: an attempt ended in error")
            for verdict in attempt["verdicts"]:
                if verdict["source"] == "judge":
                    for vote in verdict["votes"] or [verdict["verdict"]]:
                        voted[("fail" if broken else "pass", vote)] += 1
    for key in logged.keys() | recorded.keys():
        if logged[key] != recorded[key]:
            tally.attempt_events += abs(logged[key] - recorded[key])
            note(tally, f"{key}: the agent had {logged[key]}, lk-eval recorded {recorded[key]}")
    sent = Counter((o, v) for o, v, why in answers if not why.startswith(CANARY))
    tally.votes_checked += sum(voted.values())
    for key in sent.keys() | voted.keys():
        if sent[key] != voted[key]:
            tally.vote_events += abs(sent[key] - voted[key])
            note(tally, f"votes {key}: the server sent {sent[key]}, lk-eval recorded {voted[key]}")


def note(tally: Tally, line: str) -> None:
    if len(tally.fidelity_notes) < 5:
        tally.fidelity_notes.append(line)


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


def needed(rate_: float, bound: float, upper: bool) -> int:
    """Conversations at which a measured ``rate_``'s 95% Clopper-Pearson end reaches ``bound``
    (the upper end down to it when ``upper``, else the lower end up to it); 0 if never."""
    if (upper and bound <= rate_) or (not upper and bound >= rate_):
        return 0
    n = 50
    while n < 10**7:
        low, high = clopper_pearson(round(rate_ * n), n)
        if (upper and high <= bound) or (not upper and low >= bound):
            return n
        n = int(n * 1.1) + 1
    return 0


def mean_bound(values: list[float]) -> tuple[float, float]:
    """Mean and its 95% upper bound (normal, over the runs)."""
    n = len(values)
    mean = sum(values) / max(1, n)
    if n < 2:
        return mean, float("inf")
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, mean + 1.96 * math.sqrt(var / n)


def report_sequential(
    stable: Tally, regressed: Tally, args: argparse.Namespace, plain: float | None
) -> None:
    """The sequential test's figures, each with its bound, and whether they prove the goals.

    The proof has three parts. (1) The CLI decides every scenario exactly as the shipped rule
    prescribes (every scenario run's recorded votes replayed through the rule: votes asked,
    attempts run, outcome). (2) The rates the rule sees, measured per attempt through the
    CLI: the judge's error is set exactly by the server (``exact``: each verdict is flipped
    with probability exactly ``--flip``, and exactly that share of them is), and the recorded
    votes are checked against it; the agent's breakage is the agent's own draw, measured with
    a 95% Clopper-Pearson interval over every conversation. (3) The rule's exact operating
    characteristics (``operating()``, dynamic programming over every path of votes) at the
    end of each interval that is worse for the goal: a goal is proven when it holds there.
    """
    n, rule = args.scenarios, SequentialRule()
    e_k = stable.votes_wrong + regressed.votes_wrong
    e, e_lo, e_hi = rate(e_k, stable.votes + regressed.votes)
    a_k = stable.stable_broken + regressed.stable_broken
    a_n = stable.stable_conversations + regressed.stable_conversations
    a, a_lo, a_hi = rate(a_k, a_n)
    r_n = regressed.regressed_conversations
    r, r_lo, r_hi = rate(regressed.regressed_broken, r_n)
    decided = stable.decided + regressed.decided
    conform = stable.as_prescribed + regressed.as_prescribed
    print(
        f"  (1) the CLI's decisions: {conform} of {decided} sequential scenario runs decided "
        "exactly as the rule prescribes (votes asked, attempts run, outcome)"
    )
    for line in (stable.deviations + regressed.deviations)[:5]:
        print(f"    NOT as prescribed: {line}")
    e_ok = e_lo <= args.flip <= e_hi
    print(
        f"  (2) judge: recorded votes wrong {e_k}/{stable.votes + regressed.votes} = {pct(e)} "
        f"[95% {pct(e_lo)}..{pct(e_hi)}]; the server flips exactly {pct(args.flip)} "
        f"({'exact' if args.exact else 'RANDOM'} flipper): "
        f"{'consistent' if e_ok else 'NOT consistent'}"
    )
    print(
        f"      agent: stable conversations broken {a_k}/{a_n} = {pct(a)} [95% {pct(a_lo)}.."
        f"{pct(a_hi)}] (stated {pct(args.agent_fail)}); regressed ones broken "
        f"{regressed.regressed_broken}/{r_n} = {pct(r)} [95% {pct(r_lo)}..{pct(r_hi)}] "
        f"(stated {pct(args.fail_rate)})"
    )
    checked, events = (
        stable.attempts_checked + regressed.attempts_checked,
        (stable.attempt_events + regressed.attempt_events),
    )
    vchecked, vevents = (
        stable.votes_checked + regressed.votes_checked,
        (stable.vote_events + regressed.vote_events),
    )
    added = clopper_pearson(events, checked)[1]
    vadded = clopper_pearson(vevents, vchecked)[1]
    print(
        f"      fidelity: {events} of {checked} attempts differ from the agent's own record or "
        f"ended in error, {vevents} of {vchecked} votes from what the server sent: lk-eval "
        f"adds at most {pct(added)} to an attempt's and {pct(vadded)} to a vote's error (95%)"
    )
    for line in (stable.fidelity_notes + regressed.fidelity_notes)[:5]:
        print(f"    fidelity: {line}")
    # the proof point: the stated rates (the agent draws with exactly that probability, the
    # server flips each verdict with exactly that probability) worsened by what lk-eval can
    # add at its 95% bound
    fine_p = operating(rule, 1 - args.agent_fail - added, args.flip + vadded)
    broken_p = operating(rule, 1 - args.fail_rate + added, args.flip + vadded)
    half_p = operating(rule, 0.5, args.flip + vadded)
    fb_p = rule_suite_blocks(fine_p.p_fail, n)
    fine_n = operating(rule, 1 - args.agent_fail, args.flip)
    broken_n = operating(rule, 1 - args.fail_rate, args.flip)
    fb_n = rule_suite_blocks(fine_n.p_fail, n)
    # from the measured rates alone: each at its 95% end (the bench's sampling noise included)
    fine_b = operating(rule, 1 - a_hi, e_hi)
    broken_b = operating(rule, 1 - r_lo, e_hi)
    fb_b = rule_suite_blocks(fine_b.p_fail, n)
    fine_m, broken_m = operating(rule, 1 - a, e), operating(rule, 1 - r, e)
    print(
        f"  (3) {n}-scenario stable suite falsely blocked: exact at the stated rates {pct(fb_n)}"
        f"; with lk-eval's added error at its bound <= {pct(fb_p)}; at the measured rates "
        f"{pct(rule_suite_blocks(fine_m.p_fail, n))}, <= {pct(fb_b)} at their 95% ends "
        "(goal <= 1%)"
    )
    print(
        f"      {pct(args.fail_rate)}-broken scenario caught: exact at the stated rates "
        f"{pct(broken_n.p_fail)}; with lk-eval's added error >= {pct(broken_p.p_fail)}; at the "
        f"measured rates {pct(broken_m.p_fail)}, >= {pct(broken_b.p_fail)} at their 95% ends "
        f"(goal >= 99%); 50%-broken: {pct(operating(rule, 0.5, args.flip).p_fail)} "
        f"(>= {pct(half_p.p_fail)})"
    )
    calls = [float(c) for c in stable.calls_per_run]
    mean, hi = mean_bound(calls)
    exact_calls = n * (2 * fine_n.expected_attempts + fine_n.expected_votes)
    ratio = f"{mean / plain:.2f}x (<= {hi / plain:.2f}x)" if plain else "(no plain pass run)"
    if plain:  # the judge preflight's calls, in both: a plain pass is 3 calls per scenario more
        bare, pre = 3.0 * n, plain - 3.0 * n
        ratio += (
            f"; without the preflight's {pre:.1f} in both {(mean - pre) / bare:.2f}x "
            f"(<= {(hi - pre) / bare:.2f}x; exact {exact_calls / bare:.2f}x)"
        )
    print(
        f"      LLM calls per stable suite run: {mean:.1f} (<= {hi:.1f}) over {len(calls)} runs"
        f" = {ratio} one plain pass ({plain or 0:.1f}); exact at the stated rates: "
        f"{exact_calls:.1f} + the preflight (goal <= 4.5x)"
    )
    as_rule = decided > 0 and conform == decided
    proofs = {
        "false blocks <= 1%": (fb_p <= GOAL_FALSE_BLOCK, fb_b <= GOAL_FALSE_BLOCK),
        "caught >= 99%": (broken_p.p_fail >= GOAL_CATCH, broken_b.p_fail >= GOAL_CATCH),
        "calls <= 4.5x": ((plain is not None and (hi - plain + 3.0 * n) / (3.0 * n) <= 4.5),) * 2,
    }
    for goal, (held, alone) in proofs.items():
        print(
            f"      proven: {'yes' if held and as_rule else 'NO'}  {goal}  (from the measured "
            f"rates alone: {'yes' if alone and as_rule else 'no'})"
        )
    everything = as_rule and all(held for held, _ in proofs.values())
    print(
        f"  proven (all, at the stated rates, every decision as the rule's, lk-eval's added "
        f"error bounded): {'yes' if everything else 'NO'}"
    )
    err_max = margin(
        lambda x: goals_hold(rule, n, 1 - args.agent_fail, 1 - args.fail_rate, x), args.flip
    )
    fail_max = margin(
        lambda x: goals_hold(rule, n, 1 - x, 1 - args.fail_rate, args.flip), args.agent_fail
    )
    good_max = margin(
        lambda x: operating(rule, x, args.flip).p_fail >= GOAL_CATCH, 1 - args.fail_rate
    )
    print(
        f"  margins (exact): both goals hold up to a judge erring {pct(err_max)}, an agent "
        f"failing {pct(fail_max)} of good conversations; the catch goal down to "
        f"{pct(1 - good_max)} broken. Conversations to bound them at these rates: "
        f"{needed(args.agent_fail, fail_max, True)} stable, "
        f"{needed(1 - args.fail_rate, good_max, True)} regressed"
    )
    print(
        f"  attempts per fine scenario: measured {stable.attempts / max(1, stable.runs * n):.2f},"
        f" exact {fine_n.expected_attempts:.2f} ({fine_n.expected_votes:.2f} judge votes); "
        f"per {pct(args.fail_rate)}-broken scenario {broken_n.expected_attempts:.2f}"
    )
    alternatives(rule, args, r_lo, plain, stable)


def alternatives(
    shipped: SequentialRule,
    args: argparse.Namespace,
    r_lo: float,
    plain: float | None,
    stable: Tally,
) -> None:
    """Stricter error rates: what they would prove at this run's bounds, and what they cost."""
    base = plain or 0.0
    preflight = base - args.scenarios * 3 if base else 0.0
    print("  alternatives (exact at the stated rates; catch also at this run's bound):")
    for alpha, beta in ((0.0005, 0.01), (0.0005, 0.005), (0.0003, 0.008), (0.0003, 0.004)):
        rule = replace(shipped, alpha=alpha, beta=beta)
        fine = operating(rule, 1 - args.agent_fail, args.flip)
        broken = operating(rule, 1 - args.fail_rate, args.flip)
        bound = operating(rule, 1 - r_lo, args.flip)
        cost = args.scenarios * (2 * fine.expected_attempts + fine.expected_votes) + preflight
        print(
            f"    alpha {alpha}, beta {beta}: false blocks "
            f"{pct(rule_suite_blocks(fine.p_fail, args.scenarios))}, caught "
            f"{pct(broken.p_fail)} (>= {pct(bound.p_fail)}), {fine.expected_attempts:.2f} "
            f"attempts, calls {cost / base if base else float('nan'):.2f}x"
        )


def report_calls(name: str, stable: Tally, plain: float | None) -> None:
    """LLM calls per stable suite run, by model, against one plain pass (``--repeat 1``)."""
    runs = max(1, stable.runs)
    per_run = {model: count / runs for model, count in sorted(stable.calls.items())}
    total = sum(per_run.values())
    text = ", ".join(f"{model} {count:.1f}" for model, count in per_run.items())
    line = f"  LLM calls per stable suite run: {total:.1f} ({text})"
    if plain:
        line += f" = {total / plain:.2f}x one plain pass ({plain:.1f})"
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


def load() -> str:
    """The load average now (printed beside every figure: the machine is shared)."""
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def run_config(
    name: str, flags: list[str], index: int, tmp: str, args: argparse.Namespace
) -> dict[bool, Tally]:
    """Suite runs of one configuration (stable and regressed alternately) until ``--runs``
    pairs or ``--minutes`` are spent; the tallies by regressed."""
    noisy = {"fraction": args.flip, "seed": args.seed + index, "exact": not args.random_flips}
    tallies = {False: Tally(), True: Tally()}
    runs = args.plain_runs if name == "repeat 1" else args.runs
    deadline = time.monotonic() + 60 * args.minutes if args.minutes else math.inf
    print(f"\n[{name}] started {time.strftime('%H:%M:%S', time.gmtime())} UTC, {load()}")
    with LLMServer(RULES, quirks={"noisy_verdicts": noisy}) as llm:
        for run in range(runs):
            if time.monotonic() > deadline:
                break
            for regressed in (False, True):
                tally, started = tallies[regressed], time.monotonic()
                before = len(llm.requests)
                flipper = llm.quirks.noisy_verdicts
                assert flipper is not None
                answered = len(flipper.answers)
                work = Path(tmp) / f"{index}-{run}-{int(regressed)}"
                code, results = run_suite(work, llm, flags, regressed, args)
                fidelity(tally, work, results, flipper.answers[answered:])
                tally.seconds += time.monotonic() - started
                requests = llm.requests[before:]
                tally.calls_per_run.append(len(requests))
                for request in requests:
                    model = str(request.body.get("model"))
                    tally.calls[model] = tally.calls.get(model, 0) + 1
                score(tally, code, results, args.regressed * regressed)
        flipper = llm.quirks.noisy_verdicts
        assert flipper is not None
        print(
            f"[{name}] ended {time.strftime('%H:%M:%S', time.gmtime())} UTC, {load()}; judge "
            f"verdicts seen {flipper.seen}, flipped {flipper.flipped} "
            f"({pct(flipper.flipped / max(1, flipper.seen))})"
        )
    if args.save:  # the raw counts, to recompute the figures without rerunning
        raw = {name: {"stable": vars(tallies[False]), "regressed": vars(tallies[True])}}
        with open(args.save, "a", encoding="utf-8") as file:
            file.write(json.dumps(raw) + "\n")
    return tallies


def characteristics(args: argparse.Namespace) -> int:
    """The defaults' and each ``--catch`` setting's exact operating characteristics."""
    from lkeval.cli.options import parse_catch, sensitivity_rule
    from lkeval.results.sensitivity import plan_lines

    settings = [("defaults (--catch 90%:99% --max-attempts 20)", SequentialRule())]
    for text in args.catch or ["50%:90%"]:
        rule = sensitivity_rule(parse_catch(text), args.max_attempts)
        settings.append((f"--catch {text} --max-attempts {args.max_attempts}", rule))
    for name, rule in settings:
        started = time.monotonic()
        lines = plan_lines(rule, args.scenarios)
        print(f"\n{name} ({time.monotonic() - started:.1f} s to compute)")
        print("\n".join(lines))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="suite runs per agent and config")
    parser.add_argument("--plain-runs", type=int, default=3, help="suite runs of --repeat 1")
    parser.add_argument("--minutes", type=float, default=0, help="stop a config after this")
    parser.add_argument("--scenarios", type=int, default=20)
    parser.add_argument("--flip", type=float, default=0.1, help="judge verdicts flipped")
    parser.add_argument(
        "--random-flips", action="store_true", help="flip each verdict by chance (not exactly)"
    )
    parser.add_argument("--fail-rate", type=float, default=0.9, help="regressed conversations")
    parser.add_argument(
        "--agent-fail", type=float, default=0.05, help="conversations the agent fails alone"
    )
    parser.add_argument("--regressed", type=int, default=10, help="regressed scenarios a suite")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--only", choices=sorted(CONFIGS), action="append", help="a configuration (repeatable)"
    )
    parser.add_argument("--save", metavar="FILE", help="append the raw counts (JSON lines)")
    parser.add_argument(
        "--characteristics", action="store_true", help="print the exact figures and exit"
    )
    parser.add_argument("--catch", action="append", default=[], metavar="BROKEN:CHANCE")
    parser.add_argument("--max-attempts", type=int, default=40, help="the cap with --catch")
    args = parser.parse_args()
    if args.characteristics:
        return characteristics(args)
    args.exact = not args.random_flips
    print(
        f"verdict trust: {args.scenarios} scenarios, judge flips {pct(args.flip)} "
        f"({'exactly' if args.exact else 'at random'}); agent fails {pct(args.agent_fail)} "
        f"of good conversations; regressed suite: {args.regressed} scenarios broken in "
        f"{pct(args.fail_rate)} of their conversations; up to {args.runs} suite runs per agent"
        f" ({args.plain_runs} at --repeat 1){f', {args.minutes} min' if args.minutes else ''}"
    )
    configs = {name: CONFIGS[name] for name in args.only} if args.only else CONFIGS
    if "repeat 1" in configs:  # the plain pass first: the others' calls are compared to it
        configs = {"repeat 1": configs["repeat 1"], **configs}
    plain: float | None = None
    with tempfile.TemporaryDirectory(prefix="verdict-trust-") as tmp:
        for index, (name, flags) in enumerate(configs.items()):
            tallies = run_config(name, flags, index, tmp, args)
            report(name, flags, tallies[False], tallies[True], args.scenarios)
            if "--repeat" not in flags:
                report_sequential(tallies[False], tallies[True], args, plain)
            if name == "repeat 1":
                plain = mean_bound([float(c) for c in tallies[False].calls_per_run])[0]
            report_calls(name, tallies[False], plain)
    return 0


if __name__ == "__main__":
    sys.exit(main())
