"""The caller's and the judge's flags (``lkeval run``, ``lkeval calibrate``): models, where
they are served, how judging is done. Defaults come from :class:`lkeval.llm.config.LLMOptions`;
keys come from the environment only, never from a flag."""

from __future__ import annotations

import argparse

from lkeval import defaults
from lkeval.cli import options as opt
from lkeval.llm.config import LLMOptions
from lkeval.scenarios.bounds import (
    MAX_LLM_RETRIES,
    MAX_REJUDGE,
    MAX_TURNS,
)
from lkeval.scenarios.model import BUILTIN_JUDGES


def add_llm_arguments(parser: argparse.ArgumentParser) -> None:
    """The caller/judge LLM and judging flags of ``run`` (one group)."""
    group = parser.add_argument_group(
        "caller and judge models",
        "API keys come from the environment only: LKEVAL_CALLER_API_KEY / LKEVAL_JUDGE_API_KEY, "
        "else OPENAI_API_KEY; LiveKit Inference uses LIVEKIT_API_KEY and LIVEKIT_API_SECRET.",
    )
    for role, what in (("caller", "the simulated caller"), ("judge", "the judge")):
        _add_endpoint(group, role, what)
    group.add_argument(
        "--price",
        metavar="MODEL=IN,OUT",
        type=opt.price_override,
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
        f"default {defaults.CALLER_TEMPERATURE:g}: --repeat samples other conversations; "
        "the judge always uses 0)",
    )
    _add_judging(parser.add_argument_group("judging"))
    group.add_argument(
        "--llm-retries",
        metavar="N",
        type=opt.non_negative_int_up_to(MAX_LLM_RETRIES),
        help="retries of a caller/judge LLM request on 429, 5xx and timeouts, with backoff "
        f"(env LKEVAL_LLM_RETRIES, default {defaults.LLM_RETRIES})",
    )
    group.add_argument(
        "--llm-timeout",
        metavar="SECONDS",
        type=opt.seconds,
        help="the longest one caller/judge LLM call may take, start to last token, its "
        f"retries included (env LKEVAL_LLM_TIMEOUT, default {defaults.LLM_TIMEOUT:g})",
    )


def _add_judging(group: argparse._ArgumentGroup) -> None:
    """``--judges``, ``--rejudge``, ``--maybe-is-pass``, ``--allow-weak-judge``, ``--max-turns``."""
    group.add_argument(
        "--judges",
        metavar="NAME[,NAME]",
        type=opt.parse_judge_names,
        default=(),
        help=f"LiveKit built-in judges to run on every scenario: {', '.join(BUILTIN_JUDGES)}",
    )
    group.add_argument(
        "--rejudge",
        metavar="K",
        type=opt.non_negative_int_up_to(MAX_REJUDGE),
        default=LLMOptions.rejudge,
        help="when the judge fails a scenario, ask K more times; the majority stands "
        f"(default {LLMOptions.rejudge})",
    )
    group.add_argument(
        "--maybe-is-pass",
        action="store_true",
        help="count a 'maybe' verdict as a pass (default: maybe fails)",
    )
    group.add_argument(
        "--allow-weak-judge",
        action="store_true",
        help="run even when the judge passes the preflight's known-bad canary (default: stop, "
        "exit 2), and let its passes count on scenarios its calibration says it cannot judge "
        "(default: error); every report and the gate line then say so",
    )
    group.add_argument(
        "--max-turns",
        metavar="N",
        type=opt.positive_int_up_to(MAX_TURNS),
        default=LLMOptions.max_turns,
        help=f"most caller turns in a simulated conversation (default {LLMOptions.max_turns})",
    )


def _add_endpoint(group: argparse._ArgumentGroup, role: str, what: str) -> None:
    """``--<role>-model``/``-base-url``/``-price``; :func:`options.llm_options` reads them."""
    up = role.upper()
    group.add_argument(
        f"--{role}-model",
        metavar="MODEL",
        help=f"model of {what} (env LKEVAL_{up}_MODEL); provider/model with no base URL "
        f"uses LiveKit Inference (default: {defaults.LLM_MODEL} with a base URL, or with an "
        f"OpenAI key and no LiveKit credentials; else openai/{defaults.LLM_MODEL} on LiveKit "
        "Inference, which with no credentials at all stops the run asking for LIVEKIT_API_KEY)",
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
        type=opt.price,
        help=f"USD per 1M input,output tokens of {what}, for cost estimates "
        "(default: the genai-prices table, or --price)",
    )


__all__ = ["add_llm_arguments"]
