"""The command-line flags of the caller/judge LLMs and of judging, for ``lkeval run``.

Apart from :mod:`lkeval.llm.config` (which turns flags and environment into an
:class:`~lkeval.llm.config.LLMSpec`) so the CLI surface can change without touching how a
spec is resolved. Values are checked here, at parse time, so a typo exits 2 before any agent
boots. There is deliberately no API-key flag: keys come from the environment only.
"""

from __future__ import annotations

import argparse

from lkeval.llm.config import (
    BUILTIN_JUDGES,
    DEFAULT_CALLER_TEMPERATURE,
    DEFAULT_MAX_TURNS,
    DEFAULT_MODEL,
    DEFAULT_TIMEOUT,
    parse_price,
)
from lkeval.results.pricing import parse_price_override

__all__ = ["add_llm_arguments", "parse_judge_names"]


def _price_override(text: str) -> tuple[str, tuple[float, float]]:
    try:
        return parse_price_override(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _price_arg(text: str) -> str:
    try:
        parse_price(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return value


def positive_int(text: str) -> int:
    value = non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0")
    return value


def parse_judge_names(text: str) -> tuple[str, ...]:
    """``"safety, tool_use"`` → ``("safety", "tool_use")``, rejecting unknown names."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in BUILTIN_JUDGES]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown judge(s) {', '.join(unknown)}; known: {', '.join(BUILTIN_JUDGES)}"
        )
    return names


def add_llm_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the caller/judge LLM and judging flags to a ``run`` parser (one group)."""
    group = parser.add_argument_group(
        "LLMs and judging",
        "API keys come from the environment only: LKEVAL_CALLER_API_KEY / LKEVAL_JUDGE_API_KEY, "
        "else OPENAI_API_KEY; LiveKit Inference uses LIVEKIT_API_KEY and LIVEKIT_API_SECRET.",
    )
    for role, what in (("caller", "the simulated caller"), ("judge", "the judge")):
        up = role.upper()
        group.add_argument(
            f"--{role}-model",
            metavar="MODEL",
            help=f"model of {what} (env LKEVAL_{up}_MODEL); provider/model with no base URL "
            f"uses LiveKit Inference (default: openai/{DEFAULT_MODEL} if LIVEKIT_API_KEY is "
            f"set, else {DEFAULT_MODEL})",
        )
        group.add_argument(
            f"--{role}-base-url",
            metavar="URL",
            help=f"OpenAI-compatible endpoint of {what} (env LKEVAL_{up}_BASE_URL, else "
            "OPENAI_BASE_URL); 'livekit' forces LiveKit Inference",
        )
        group.add_argument(
            f"--{role}-price",
            metavar="IN,OUT",
            type=_price_arg,
            help=f"USD per 1M input,output tokens of {what}, for cost estimates "
            "(default: the genai-prices table, or --price)",
        )
    group.add_argument(
        "--price",
        metavar="MODEL=IN,OUT",
        type=_price_override,
        action="append",
        default=[],
        help="USD per 1M input,output tokens of MODEL (the agent's, the caller's or the "
        "judge's), over the maintained genai-prices table; repeatable. Models neither knows "
        "are reported as unpriced, never $0",
    )
    group.add_argument(
        "--caller-temperature",
        metavar="T",
        type=float,
        default=None,
        help="sampling temperature of the simulated caller, 0-2 (env LKEVAL_CALLER_TEMPERATURE, "
        f"default {DEFAULT_CALLER_TEMPERATURE:g}: --repeat samples other conversations; "
        "the judge always uses 0)",
    )
    group.add_argument(
        "--judges",
        metavar="NAME[,NAME]",
        type=parse_judge_names,
        default=(),
        help=f"LiveKit built-in judges to run on every scenario: {', '.join(BUILTIN_JUDGES)}",
    )
    group.add_argument(
        "--rejudge",
        metavar="K",
        type=non_negative_int,
        default=0,
        help="when the judge fails a scenario, ask K more times; the majority stands (default 0)",
    )
    group.add_argument(
        "--maybe-is-pass",
        action="store_true",
        help="count a 'maybe' verdict as a pass (default: maybe fails)",
    )
    group.add_argument(
        "--max-turns",
        metavar="N",
        type=positive_int,
        default=DEFAULT_MAX_TURNS,
        help=f"most caller turns in a simulated conversation (default {DEFAULT_MAX_TURNS})",
    )
    group.add_argument(
        "--llm-retries",
        metavar="N",
        type=non_negative_int,
        default=None,
        help="retries of a caller/judge LLM request on 429, 5xx and timeouts, with backoff "
        "(env LKEVAL_LLM_RETRIES, default 4)",
    )
    group.add_argument(
        "--llm-timeout",
        metavar="SECONDS",
        type=positive_float,
        default=None,
        help=f"timeout of one caller/judge LLM request (env LKEVAL_LLM_TIMEOUT, default "
        f"{DEFAULT_TIMEOUT:g})",
    )
