"""The command-line surface: flags, help texts and groups of ``run`` and ``report``.

Defaults come from the option classes (:mod:`lkeval.cli.options`), so each is written once;
argparse fills a :class:`argparse.Namespace` that only :mod:`lkeval.cli.options` reads.
There is deliberately no API-key flag: keys come from the environment only (flags end up in
shell history, CI logs and the results file's ``argv``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from lkeval import defaults
from lkeval.cli import options as opt
from lkeval.cli.options import ReportOptions, RunOptions
from lkeval.llm.config import LLMOptions
from lkeval.publish.github.comments import COMMENT_MODES
from lkeval.reporters import REPORTER_BY_NAME
from lkeval.results.gate import FAIL_ON_CHOICES
from lkeval.results.history import MAX_WINDOW as MAX_HISTORY_RUNS
from lkeval.run.suite import SUPPORTED_LIVEKIT_AGENTS as SUPPORTED_RANGE
from lkeval.scenarios.bounds import (
    MAX_AGENT_LOG_MIB,
    MAX_CONCURRENCY,
    MAX_LLM_RETRIES,
    MAX_REJUDGE,
    MAX_REPEAT,
    MAX_RUNS,
    MAX_TURNS,
)
from lkeval.scenarios.model import BUILTIN_JUDGES


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


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """The report and merge-gate flags shared by ``lkeval run`` and ``lkeval report``."""
    group = parser.add_argument_group("reports, baseline and gate")
    parser.set_defaults(report_files={})
    for name, reporter in REPORTER_BY_NAME.items():
        group.add_argument(
            f"--{name}",
            dest="report_files",
            action=_ReportFile,
            const=name,
            metavar="PATH",
            help=f"write {reporter.description} here",
        )
    _add_baseline(group)
    _add_gate(group)
    _add_budgets(parser.add_argument_group("latency and cost budgets"))
    _add_gate_allowances(group)
    _add_comment(parser.add_argument_group("pull-request comment"))
    _add_github(parser.add_argument_group("GitHub"))


def _add_baseline(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--baseline",
        metavar="PATH|github:BRANCH",
        help="results to compare against: a file of an earlier run, or github:BRANCH for the "
        "results artifact of BRANCH's latest finished run of this workflow (github: alone: "
        "the default branch; needs a token with actions: read); none found is a note, not a "
        "failure",
    )
    group.add_argument(
        "--baseline-artifact",
        metavar="NAME",
        default=defaults.BASELINE_ARTIFACT,
        help="with --baseline github:BRANCH: the name the results were uploaded under "
        f"(default: {defaults.BASELINE_ARTIFACT})",
    )
    group.add_argument(
        "--history-runs",
        type=opt.positive_int_up_to(MAX_HISTORY_RUNS),
        default=ReportOptions.history_runs,
        metavar="N",
        help="with --baseline: judge failures against each scenario's pass rate over the last "
        f"N runs the baseline's history holds (default %(default)s, at most {MAX_HISTORY_RUNS})",
    )


def _add_gate(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--fail-on",
        choices=FAIL_ON_CHOICES,
        default=ReportOptions.fail_on,
        help="what fails the gate: any failure (default), only failures the baseline did not "
        "have (regressed, new, or no verdict there), or never",
    )
    group.add_argument(
        "--catch",
        type=opt.parse_catch,
        metavar="BROKEN:CHANCE",
        help="the sequential test's sensitivity: catch a scenario broken in BROKEN of its "
        "conversations at least CHANCE of the time, e.g. 50%%:90%% (default 90%%:99%%; "
        "`lkeval validate --catch ...` prints what it costs; see docs/sampling.md)",
    )
    group.add_argument(
        "--min-pass-rate",
        type=opt.parse_pass_rate,
        metavar="RATE",
        help="also fail when the pass rate (non-quarantined, non-skipped scenarios) is below "
        "RATE: 0.9 or 90%%",
    )


def _add_gate_allowances(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--allow-nothing-to-check",
        action="store_true",
        help="do not fail the gate on scenarios with nothing to check (no expectations, no "
        "judged agent_expectations, no judges); they are never played either way",
    )
    group.add_argument(
        "--allow-all-quarantined",
        action="store_true",
        help="pass a run in which every scenario that ran is quarantined (by default a gate "
        "that counted no scenario fails)",
    )


def _add_budgets(group: argparse._ArgumentGroup) -> None:
    """``--max-latency``, ``--max-cost``, ``--latency-regression``, ``--cost-regression``."""
    group.add_argument(
        "--max-latency",
        type=opt.latency_budget,
        metavar="STAT=DURATION",
        help="fail when the suite's turn latency is over budget: p50|p95|max|ttft_p50|"
        "ttft_p95|ttft_max|first_audio.p50|first_audio.p95|first_audio.max (audio), e.g. "
        "p95=1.5s or p95=1200ms,ttft_p95=600ms "
        "(per scenario: latency: in the YAML)",
    )
    group.add_argument(
        "--max-cost",
        type=opt.usd,
        metavar="USD",
        help="fail when the run's estimated cost (agent + caller + judge) is over USD; "
        "unpriced models make it uncheckable, which fails too (see --price)",
    )
    group.add_argument(
        "--latency-regression",
        type=opt.percent,
        metavar="PERCENT",
        help="with --baseline: fail when p95 turn latency (suite or a scenario) grew by more "
        "than PERCENT, e.g. 20%%; noisy deltas (few turns, within the spread) never fail",
    )
    group.add_argument(
        "--cost-regression",
        type=opt.percent,
        metavar="PERCENT",
        help="with --baseline: fail when the run's cost grew by more than PERCENT, e.g. 25%%",
    )


class _ReportFile(argparse.Action):
    """``--<reporter> PATH``: collects {reporter name: path} in one ``report_files`` dict."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        files = dict(getattr(namespace, self.dest) or {})
        files[self.const] = values
        setattr(namespace, self.dest, files)


def _add_comment(group: argparse._ArgumentGroup) -> None:
    """``--comment``, ``--comment-id``, ``--title``, ``--comment-author``."""
    group.add_argument(
        "--comment",
        choices=COMMENT_MODES,
        default=ReportOptions.comment,
        help="PR comment: update one sticky comment (default), post a new one, or off",
    )
    group.add_argument(
        "--comment-id",
        type=opt.parse_comment_id,
        default=ReportOptions.comment_id,
        metavar="ID",
        help="keeps one sticky comment per ID, for several eval jobs on one PR; its heading "
        "names the ID",
    )
    group.add_argument(
        "--title",
        metavar="TEXT",
        help="the reports' heading (default: lk-eval, plus the comment ID when not default)",
    )
    group.add_argument(
        "--comment-author",
        metavar="LOGIN",
        help="who the token posts as, when it cannot say (a GitHub App's token: "
        "SLUG[bot]); only its comment with the marker is updated",
    )


def _add_github(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--github",
        action=argparse.BooleanOptionalAction,
        help="GitHub Actions output: annotations, summary, outputs, comment "
        "(default: on when GITHUB_ACTIONS=true)",
    )
    group.add_argument(
        "--github-token",
        metavar="TOKEN",
        help="token for the PR comment (default: $GITHUB_TOKEN)",
    )
    group.add_argument(
        "--summary",
        action=argparse.BooleanOptionalAction,
        help="append the report to $GITHUB_STEP_SUMMARY (default: on with --github)",
    )
    group.add_argument(
        "--pr",
        type=int,
        metavar="NUMBER",
        help="PR to comment on when the event does not say (workflow_run from a fork)",
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
