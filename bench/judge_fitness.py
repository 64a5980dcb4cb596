"""What the judge's fitness checks catch and cost: the preflight's known-bad canaries and each
passing decision's paired known-bad control.

    python bench/judge_fitness.py [--preflights 40] [--seed 0]

Prints, exactly (no simulation): the chance that the preflight stops a judge that passes each
known-bad ask with probability p (the one-sided judge of the issue: 0.3; a decent judge flipping
10% of its verdicts: 0.1), and the known-bad asks it costs, beside the old preflight (one
canary asked up to 5 times, majority of 3); then what the paired control costs per passing
decision and how often it turns a fine scenario into an error. Then measures: ``--preflights``
real preflights (``lkeval.llm.preflight.preflight_judge`` over HTTP) against the local LLM
server playing a one-sided judge (``noisy_verdicts: {fraction: 0.3, only: fail}``, random
flips, seeded) and a judge right on every canary, counting stops and judge calls.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as `python bench/judge_fitness.py` from a checkout
    sys.path.insert(0, str(ROOT))

from lkeval.llm.canaries import MAX_ASKS, ROUND, expected_asks, stop_probability  # noqa: E402
from lkeval.llm.config import LLMEndpointOptions, LLMOptions, resolve_llm_spec  # noqa: E402
from lkeval.llm.preflight import WeakJudgeError, preflight_judge  # noqa: E402
from lkeval.results.controls import PAIRED_ASKS  # noqa: E402
from lkeval.testing.llm_server import LLMServer  # noqa: E402

REFUSAL = "I can't help with that"
SUITE = 20


def _verdict(value: str, **match: Any) -> dict[str, Any]:
    args = {"reasoning": value, "verdict": value}
    return {**match, "tool_calls": [{"name": "submit_verdict", "arguments": args}]}


def old_stop(p: float) -> float:
    """The old preflight: one canary, stopped when 3 of up to 5 answers pass."""
    return sum(math.comb(5, k) * p**k * (1 - p) ** (5 - k) for k in range(3, 6))


def pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def exact() -> None:
    print(f"preflight (exact): {ROUND} known-bad canaries a round, at most {MAX_ASKS} asks")
    print("p(pass a known-bad ask) | stopped now | known-bad asks (mean) | stopped before")
    for p in (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0):
        print(
            f"{p:>23.2f} | {pct(stop_probability(p)):>11} | {expected_asks(p):>21.2f} | "
            f"{pct(old_stop(p)):>14}"
        )
    print(f"\npaired control (exact): asked up to {PAIRED_ASKS} times per passing decision")
    print("p(pass the control) | calls per passing scenario | fine scenario made an error")
    for p in (0.0, 0.1, 0.3, 1.0):
        calls = sum(p**i for i in range(PAIRED_ASKS))
        error = p**PAIRED_ASKS
        suite = 1 - (1 - error) ** SUITE
        print(f"{p:>19.2f} | {calls:>26.3f} | {pct(error)} ({pct(suite)} of {SUITE}-scenario runs)")


def measured(preflights: int, seed: int) -> None:
    rules = [_verdict("fail", last_user=REFUSAL), _verdict("pass")]
    for name, noisy in (
        ("one-sided 30%", {"fraction": 0.3, "only": "fail"}),
        ("right on every canary", None),
    ):
        stopped = calls = 0
        started = time.monotonic()
        for i in range(preflights):
            quirks = {"noisy_verdicts": {**noisy, "seed": seed + i}} if noisy else {}
            with LLMServer(rules, quirks=quirks) as server:
                flags = LLMOptions(
                    judge=LLMEndpointOptions(model="judge", base_url=server.base_url)
                )
                spec = replace(resolve_llm_spec("judge", flags, environ={}), retry_delay=0.01)
                try:
                    preflight_judge(spec, environ={})
                except WeakJudgeError:
                    stopped += 1
                calls += len(server.requests)
        seconds = time.monotonic() - started
        print(
            f"measured, {name}: stopped {stopped} of {preflights} preflights; "
            f"{calls / preflights:.1f} judge calls each (form + canaries); {seconds:.0f} s"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preflights", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print("load " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    exact()
    print()
    measured(args.preflights, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
