"""The command-line surface: flags, help texts and groups of ``run`` and ``report``.

Defaults come from the option classes (:mod:`lkeval.cli.options`), so each is written once;
argparse fills a :class:`argparse.Namespace` that only :mod:`lkeval.cli.options` reads.
There is deliberately no API-key flag: keys come from the environment only (flags end up in
shell history, CI logs and the results file's ``argv``).
"""

from __future__ import annotations

import argparse
import sys

from lkeval import defaults
from lkeval.cli import options as opt
from lkeval.cli.llm_flags import add_llm_arguments as add_llm_arguments
from lkeval.cli.options import RunOptions
from lkeval.cli.report_flags import add_report_arguments as add_report_arguments
from lkeval.run.suite import SUPPORTED_LIVEKIT_AGENTS as SUPPORTED_RANGE
from lkeval.scenarios.bounds import (
    MAX_AGENT_LOG_MIB,
    MAX_CONCURRENCY,
    MAX_REPEAT,
    MAX_RUNS,
)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The agent, scenario and output flags of ``run``, then its limits and selection."""
    parser.add_argument(
        "--agent",
        required=True,
        metavar="AGENT.py",
        help="the agent's entry file (the one you pass to `console`)",
    )
    parser.add_argument(
        "--scenarios",
        required=True,
        nargs="+",
        metavar="SCENARIOS.yaml",
        help="one or more LiveKit scenario files",
    )
    parser.add_argument(
        "--results",
        default=defaults.RESULTS,
        metavar="PATH",
        help=f"where to write the JSON results (default {defaults.RESULTS})",
    )
    parser.add_argument(
        "--logs-dir",
        metavar="DIR",
        help="one log file per agent process (default: logs/ beside --results)",
    )
    parser.add_argument(
        "--python",
        default=sys.executable,
        metavar="PYTHON",
        help="interpreter that runs the agent; it needs livekit-agents "
        f"{SUPPORTED_RANGE} (default: this one)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        type=opt.env_pair,
        metavar="KEY=VALUE",
        help="extra environment variable for the agent (repeatable)",
    )
    _add_secret_env(parser)
    parser.add_argument(
        "--no-settings",
        action="store_true",
        help="ignore [tool.lkeval] in pyproject.toml and lkeval.toml (docs/settings.md)",
    )
    _add_limits(parser.add_argument_group("limits, repeats and scale"))
    _add_audio(parser.add_argument_group("audio (docs/audio.md)"))
    _add_selection(parser.add_argument_group("selection"))
    _add_cassettes(parser.add_argument_group("record and replay (docs/replay.md)"))


def _add_cassettes(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--cassettes",
        metavar="DIR",
        help="record every HTTP exchange of each scenario attempt (the agent's LLM and tools, "
        "the caller, the judge) into one cassette per attempt in DIR, and replay them: an "
        "unchanged scenario replays main's exact conversation and verdict for free",
    )
    group.add_argument(
        "--cassette-mode",
        choices=defaults.CASSETTE_MODES,
        help="with --cassettes: auto (default) replays while requests match and goes live from "
        "the first that differs, recording the new episode; replay uses cassettes only (a "
        "request with no match is an error, never a pass); record runs live and rewrites them",
    )
    group.add_argument(
        "--cassettes-from",
        metavar="github:BRANCH",
        help="with --cassettes: before the run, restore the cassettes artifact of BRANCH's "
        "latest finished run of this workflow into DIR (github: alone: the default branch; "
        "needs a token with actions: read); none found is a note",
    )
    group.add_argument(
        "--cassettes-artifact",
        metavar="NAME",
        default=defaults.CASSETTES_ARTIFACT,
        help="with --cassettes-from: the name the cassettes were uploaded under "
        f"(default: {defaults.CASSETTES_ARTIFACT})",
    )
    group.add_argument(
        "--cassette-rules",
        metavar="FILE",
        help="with --cassettes: a JSON file of what else to ignore when matching requests "
        "(JSON paths and regexes: today's date, booking numbers, UUIDs)",
    )


def _add_limits(group: argparse._ArgumentGroup) -> None:
    """Time, attempts and agents' bounds, in the order ``--help`` lists them."""
    _add_time_and_concurrency(group)
    _add_attempts(group)
    _add_agent_bounds(group)


def _add_time_and_concurrency(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--boot-timeout",
        type=opt.seconds,
        default=RunOptions.boot_timeout,
        metavar="S",
        help=f"seconds for an agent to boot and connect (default {RunOptions.boot_timeout:g})",
    )
    group.add_argument(
        "--turn-timeout",
        type=opt.seconds,
        default=RunOptions.turn_timeout,
        metavar="S",
        help=f"seconds for one agent turn (default {RunOptions.turn_timeout:g}: an agent gives "
        "up on a hanging LLM after ~44 s)",
    )
    group.add_argument(
        "--concurrency",
        type=opt.positive_int_up_to(MAX_CONCURRENCY),
        metavar="N",
        help="conversations at once, while a few more agents boot (default "
        f"{defaults.default_concurrency()} with warm starts, "
        f"{defaults.default_concurrency(warm=False)} cold, on this machine)",
    )


def _add_attempts(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--repeat",
        type=opt.positive_int_up_to(MAX_REPEAT),
        metavar="N",
        help="a fixed plan instead of the sequential test: run every scenario N times (a "
        "scenario's own `repeat` wins)",
    )
    group.add_argument(
        "--min-pass",
        type=opt.positive_int_up_to(MAX_REPEAT),
        metavar="N",
        help="passes a repeated scenario needs (default: all of its runs)",
    )
    group.add_argument(
        "--max-attempts",
        type=opt.positive_int_up_to(MAX_REPEAT),
        default=RunOptions.max_attempts,
        metavar="N",
        help="the sequential test (the default, without --repeat) stops a scenario after N "
        f"attempts (default {RunOptions.max_attempts}; see docs/sampling.md)",
    )
    group.add_argument(
        "--max-run-attempts",
        type=opt.positive_int_up_to(MAX_RUNS),
        metavar="N",
        help="attempts the whole run may start; a scenario still undecided when they run "
        f"out is an error, never a pass (default {defaults.RUN_ATTEMPTS_PER_SCENARIO} per selected "
        "scenario)",
    )


def _add_agent_bounds(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--max-errors",
        type=opt.non_negative_int,
        default=RunOptions.max_errors,
        metavar="N",
        help="when the first N scenarios all fail with the same agent-side error (a dead "
        "LLM URL, a missing key), do not boot the rest: they are reported not run "
        f"(default {RunOptions.max_errors}; 0 never stops)",
    )
    group.add_argument(
        "--agent-memory",
        type=opt.non_negative_int,
        default=RunOptions.agent_memory,
        metavar="MIB",
        help="resident memory one agent may use; past it the agent is stopped and its "
        f"scenario is an error (default {RunOptions.agent_memory}; 0: no bound)",
    )
    group.add_argument(
        "--agent-log-limit",
        type=opt.positive_int_up_to(MAX_AGENT_LOG_MIB),
        default=RunOptions.agent_log_limit,
        metavar="MIB",
        help="log one agent may write; past it the agent is stopped and its scenario is an "
        f"error, its published log cut there (default {RunOptions.agent_log_limit})",
    )
    group.add_argument(
        "--cold-start",
        action="store_true",
        help="start every agent in a fresh interpreter (default: fork agents from a preloaded "
        "fork server where supported: ~15x faster starts, ~9x less memory per agent)",
    )
    group.add_argument(
        "--inference-class",
        choices=defaults.INFERENCE_CLASSES,
        default=RunOptions.inference_class,
        help="LiveKit Inference class of the agent's own model calls: low (default: as "
        "LiveKit's text simulations pin them since livekit-agents 1.6.10) or agent (the class "
        "each model asks for, as in production); recorded with the results and named beside "
        "every latency figure",
    )
    group.add_argument(
        "--shard",
        type=opt.shard,
        metavar="I/N",
        help="run only shard I of N (1-based), for matrix jobs; merge with `lkeval merge`",
    )


def _add_audio(group: argparse._ArgumentGroup) -> None:
    """``--mode`` and what an audio call is played with (docs/audio.md)."""
    group.add_argument(
        "--mode",
        choices=defaults.MODES,
        default=RunOptions.mode,
        help="text (default): typed turns; audio: every scenario without its own mode: is "
        "spoken into the agent's microphone in real time and heard from its speaker (its VAD, "
        "turn detection, STT and TTS in the loop; docs/audio.md)",
    )
    group.add_argument(
        "--speech",
        choices=defaults.SPEECH_CHOICES,
        default=RunOptions.speech,
        help="audio mode: agent (default) keeps the agent's own speech models; local serves "
        "its LiveKit Inference / OpenAI STT and TTS from lk-eval's local speech server (an "
        "oracle STT told each line: recognition not tested); local:pocketsphinx the same with "
        "pocketsphinx recognizing what the agent received (pip install 'lk-eval[speech]')",
    )
    group.add_argument(
        "--voice",
        default=RunOptions.voice,
        metavar="SPEC",
        help="audio mode: the caller's voice, espeak[:VOICE] (default), openai:MODEL[:VOICE] "
        "or inference:PROVIDER/MODEL[:VOICE]",
    )
    group.add_argument(
        "--impair",
        type=opt.impairments,
        default=RunOptions.impair,
        metavar="SPEC",
        help="audio mode: play the caller's line through a bad line, e.g. "
        "noise=15dB,loss=3%%,codec=mulaw,seed=7 (noise, loss, burst, jitter, codec, seed; "
        "docs/audio.md)",
    )
    group.add_argument(
        "--listen",
        default=RunOptions.listen,
        metavar="SPEC",
        help="audio mode: transcribe the agent's played audio (what a caller heard) with "
        "openai:MODEL, e.g. openai:whisper-1 (LKEVAL_LISTEN_BASE_URL, LKEVAL_LISTEN_API_KEY)",
    )


def _add_selection(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--tag",
        action="append",
        default=[],
        type=opt.tag,
        metavar="KEY=VALUE",
        help="run only scenarios with this tag (repeatable: all must match)",
    )
    group.add_argument(
        "--match",
        action="append",
        default=[],
        metavar="GLOB",
        help="run only scenarios whose id or label matches (repeatable)",
    )
    group.add_argument(
        "--quarantine",
        action="append",
        default=[],
        type=opt.tag,
        metavar="KEY=VALUE",
        help="scenarios with this tag run and are reported but never fail the gate (repeatable)",
    )


def _add_secret_env(parser: argparse.ArgumentParser) -> None:
    """``--secret-env NAME`` (repeatable)."""
    parser.add_argument(
        "--secret-env",
        action="append",
        default=[],
        metavar="NAME",
        help="mask the value of this variable (from --env or the environment) everywhere, "
        "whatever its name (names with KEY, TOKEN, SECRET, PASSWORD are masked anyway)",
    )
