"""``lkeval run``: load scenarios, run them against the agent, write results, report, gate.

The results file is written whatever happens after the first scenario starts: on success, on a
gate failure, and on SIGINT/SIGTERM (then with ``interrupted: true`` and the attempts that
finished), so no result is ever lost.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime as dt
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lkeval import __version__
from lkeval.agents.agent_host import SUPPORTED_RANGE
from lkeval.agents.cold import python_problem
from lkeval.agents.process import AgentLaunch, agent_env, kill_all_now
from lkeval.cli import EXIT_USAGE, UsageError
from lkeval.run.engine import (
    Engine,
    EngineOptions,
    Selection,
    default_concurrency,
    parse_tag_selector,
)
from lkeval.cli.llm_flags import positive_float, positive_int
from lkeval.agents.process import publish_pending_logs
from lkeval.cli.secrets import add_secret_arguments, register_run_secrets
from lkeval.publish.github.workflow import inert_line
from lkeval.results.masking import mask, process_masker, redact_argv
from lkeval.results.model import (
    RunMetadata,
    RunResults,
    ScenarioResult,
    run_start_mode,
    write_results,
)
from lkeval.scenarios.model import Scenario, min_pass_problem
from lkeval.scenarios.loader import load_or_raise
from lkeval.run.attempt import RunSettings
from lkeval.run.systemic import DEFAULT_MAX_ERRORS
from lkeval.scenarios.selection import parse_shard, select_shard
from lkeval.agents.fork_client import open_launcher

if TYPE_CHECKING:
    from lkeval.llm.config import MissingCredentialsError
    from lkeval.llm.evaluator import LLMEvaluator

DEFAULT_RESULTS = "lkeval-results/results.json"


def add_run_command(sub: Any) -> None:
    """Register ``run`` and its flags."""
    from lkeval.cli.llm_flags import add_llm_arguments
    from lkeval.publish.outputs import add_report_arguments

    parser: argparse.ArgumentParser = sub.add_parser(
        "run",
        help="run scenarios against an agent and gate on the result",
        description="Boot the agent once per scenario through the LiveKit console, play the "
        "scenarios, judge them, write results and reports, and exit by the gate.",
    )
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
        default=DEFAULT_RESULTS,
        metavar="PATH",
        help=f"where to write the JSON results (default {DEFAULT_RESULTS})",
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
        metavar="KEY=VALUE",
        help="extra environment variable for the agent (repeatable)",
    )
    add_secret_arguments(parser)
    limits = parser.add_argument_group("limits and scale")
    limits.add_argument(
        "--boot-timeout",
        type=positive_float,
        default=60.0,
        metavar="S",
        help="seconds for an agent to boot and connect (default 60)",
    )
    limits.add_argument(
        "--turn-timeout",
        type=positive_float,
        default=90.0,
        metavar="S",
        help="seconds for one agent turn (default 90: an agent gives up on a "
        "hanging LLM after ~44 s)",
    )
    limits.add_argument(
        "--concurrency",
        type=positive_int,
        default=None,
        metavar="N",
        help=f"conversations at once, while up to N more agents boot (default "
        f"{default_concurrency()} on this machine)",
    )
    limits.add_argument(
        "--repeat",
        type=positive_int,
        default=None,
        metavar="N",
        help="run every scenario N times (a scenario's own `repeat` wins)",
    )
    limits.add_argument(
        "--min-pass",
        type=positive_int,
        default=None,
        metavar="N",
        help="passes a repeated scenario needs (default: all of its runs)",
    )
    limits.add_argument(
        "--max-errors",
        type=_non_negative_int,
        default=DEFAULT_MAX_ERRORS,
        metavar="N",
        help="when the first N scenarios all fail with the same agent-side error (a dead "
        f"LLM URL, a missing key), do not boot the rest: they are reported not run "
        f"(default {DEFAULT_MAX_ERRORS}; 0 never stops)",
    )
    limits.add_argument(
        "--cold-start",
        action="store_true",
        help="start every agent in a fresh interpreter (default: fork agents from a preloaded "
        "fork server where supported: ~15x faster starts, ~9x less memory per agent)",
    )
    limits.add_argument(
        "--shard",
        type=parse_shard,
        default=None,
        metavar="I/N",
        help="run only shard I of N (1-based), for matrix jobs; merge with `lkeval merge`",
    )
    select = parser.add_argument_group("selection")
    select.add_argument(
        "--tag",
        action="append",
        default=[],
        type=_tag,
        metavar="KEY=VALUE",
        help="run only scenarios with this tag (repeatable: all must match)",
    )
    select.add_argument(
        "--match",
        action="append",
        default=[],
        metavar="GLOB",
        help="run only scenarios whose id or label matches (repeatable)",
    )
    select.add_argument(
        "--quarantine",
        action="append",
        default=[],
        type=_tag,
        metavar="KEY=VALUE",
        help="scenarios with this tag run and are reported but never fail the gate (repeatable)",
    )
    add_llm_arguments(parser)
    add_report_arguments(parser)
    parser.set_defaults(handler=run_main)


def run_main(args: argparse.Namespace) -> int:
    """The ``run`` subcommand."""
    from lkeval.llm.config import MissingCredentialsError
    from lkeval.llm.evaluator import build_evaluator
    from lkeval.publish.github.checkout import recorded_commit
    from lkeval.publish.github.context import read_context
    from lkeval.publish.outputs import load_baseline, publish
    from lkeval.publish.progress import make_progress
    from lkeval.results.pricing import PriceTable

    env = dict(_parse_env(item) for item in args.env)
    github = args.github if args.github is not None else os.environ.get("GITHUB_ACTIONS") == "true"
    # Before anything else is printed: every secret known, and in Actions masked by the runner.
    register_run_secrets(env, args.secret_env, args.github_token, github, sys.stdout)
    agent = Path(args.agent)
    if not agent.is_file():
        raise UsageError(f"--agent {args.agent}: no such file")
    args.scenarios = [_relative_to_cwd(path) for path in args.scenarios]
    groups, warnings = load_or_raise(args.scenarios)
    for warning in warnings:
        print(inert_line(str(warning)), file=sys.stderr)  # may quote the scenario file
    scenarios = [s for g in groups for s in g.scenarios]
    if args.shard is not None:
        scenarios = select_shard(scenarios, *args.shard)
    results_path = Path(args.results)
    logs_dir = Path(args.logs_dir) if args.logs_dir else results_path.parent / "logs"
    options = EngineOptions(
        concurrency=args.concurrency or default_concurrency(),
        repeat=args.repeat,
        min_pass=args.min_pass,
        quarantine=tuple(args.quarantine),
        selection=Selection(tags=tuple(args.tag), patterns=tuple(args.match)),
        max_errors=args.max_errors,
    )
    selected = [s for s in scenarios if options.selection.selects(s)]
    progress = make_progress(sys.stdout, github=github, total=len(scenarios))
    problem = python_problem(args.python)  # before anything boots: one line, not N failures
    if problem is not None:
        raise UsageError(f"--python: {problem}")
    problem = min_pass_problem(selected, args.repeat, args.min_pass)
    if problem is not None:
        raise UsageError(problem)
    if args.baseline:
        load_baseline(args.baseline)  # a bad baseline is exit 2 now, not after the whole run
    try:
        evaluator = build_evaluator(args, selected)  # checks credentials before anything boots
    except MissingCredentialsError as exc:
        if not (github and read_context().fork):
            raise
        return _fork_without_secrets(args, scenarios, options.selection.selects, exc)
    # the first lines name the caller and judge; a judge that cannot give a verdict stops here
    if evaluator is not None:
        from lkeval.llm.logs import route_livekit_logs

        route_livekit_logs(logs_dir / "livekit-in-lkeval.log")  # not into the progress display
    judge_check = evaluator.preflight(sys.stdout) if evaluator is not None else None
    options = dataclasses.replace(options, nothing_to_check=_nothing_to_check(selected, evaluator))
    started_at = dt.datetime.now(dt.timezone.utc)
    started = time.monotonic()
    launch = AgentLaunch(agent=agent.resolve(), python=args.python, env=env, log_filter=mask)
    # Agents (and the fork server) write their raw logs here (private, 0700), never into the
    # results dir: logs/ only gets masked copies. A SIGKILL of lk-eval leaves this dir behind.
    raw_logs = Path(tempfile.mkdtemp(prefix="lkeval-raw-logs-"))
    launcher, start_line = open_launcher(
        launch.python,
        agent_env(launch),
        agent=launch.agent,
        cwd=launch.cwd,
        cold_start=args.cold_start,
        log_path=raw_logs / "fork-server.log",
    )
    print(start_line, flush=True)
    try:
        # The scenario reaches each agent over its control channel, and each agent's own
        # directory sits beside its log.
        settings = RunSettings(
            launch=dataclasses.replace(launch, launcher=launcher, raw_log_dir=raw_logs),
            logs_dir=logs_dir,
            work_dir=logs_dir,
            boot_timeout=args.boot_timeout,
            turn_timeout=args.turn_timeout,
            max_turns=args.max_turns,
            prices=PriceTable(dict(getattr(args, "price", None) or ())),
        )
        engine = Engine(settings, evaluator, progress, options)
        scenario_results, stopped_by = _run_until_signal(engine, scenarios)
    finally:
        launcher.close()
        # Agents killed on an interrupt: their logs are masked here, or never reach logs/.
        publish_pending_logs(raw_logs, logs_dir, mask)  # also the fork server's log
        shutil.rmtree(raw_logs, ignore_errors=True)

    commit = recorded_commit()  # no git binary needed (the Action's image has none)
    metadata = RunMetadata(
        lkeval_version=__version__,
        livekit_agents_version=_installed("livekit-agents"),
        agent=str(args.agent),
        scenario_files=tuple(str(f) for f in args.scenarios),
        started_at=started_at.isoformat(timespec="seconds"),
        finished_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        duration_seconds=round(time.monotonic() - started, 3),
        git_sha=commit[0],
        git_branch=commit[1],
        shard=f"{args.shard[0]}/{args.shard[1]}" if args.shard else None,
        interrupted=stopped_by is not None,
        argv=redact_argv(sys.argv[1:], process_masker()),
        start_mode=run_start_mode(scenario_results),
        llms=evaluator.llms_in_use() if evaluator is not None else (),
        judge_check=judge_check,
    )
    results = RunResults(metadata=metadata, scenarios=tuple(scenario_results))
    # Log tails and transcripts can echo a key (an HTTP error with a URL, a debug print):
    # the results file is a report too, so it gets the same masking as the others.
    results = process_masker().mask_results(results)
    write_results(results, results_path)
    print(f"results: {results_path}")
    print(f"logs: {logs_dir}")
    if stopped_by is not None:
        # JUnit and Markdown too (an interrupted run is still a complete report), but no
        # GitHub comment or summary: a cancelled job has seconds left, not a network round.
        publish(
            results,
            str(results_path),
            argparse.Namespace(**{**vars(args), "github": False}),
            sys.stdout,
        )
        print(
            f"lk-eval: interrupted by {stopped_by.name}; partial results written", file=sys.stderr
        )
        return 128 + int(stopped_by)
    outcome = publish(results, str(results_path), args, sys.stdout)
    return outcome.exit_code


def _fork_without_secrets(
    args: argparse.Namespace,
    scenarios: list[Scenario],
    selects: Callable[[Scenario], bool],
    exc: MissingCredentialsError,
) -> int:
    """A fork's PR has no secrets: write results saying so, publish them, exit by the gate."""
    from lkeval.publish.github.checkout import recorded_commit
    from lkeval.publish.github.fork import fork_error, not_run_reason, not_run_results
    from lkeval.publish.outputs import publish

    print(fork_error(str(exc), os.environ, exc.variables), flush=True)
    results = not_run_results(
        scenarios,
        selects,
        not_run_reason(os.environ, exc.variables),
        agent=str(args.agent),
        scenario_files=args.scenarios,
        commit=recorded_commit(),
        shard=f"{args.shard[0]}/{args.shard[1]}" if args.shard else None,
        argv=sys.argv[1:],
    )
    write_results(results, Path(args.results))
    print(f"results: {args.results}")
    return publish(results, args.results, args, sys.stdout).exit_code


def _run_until_signal(
    engine: Engine, scenarios: list[Scenario]
) -> tuple[list[ScenarioResult], signal.Signals | None]:
    """Run the engine; on SIGINT/SIGTERM stop every agent and return what finished."""
    stopped_by: list[signal.Signals] = []

    async def main() -> list[ScenarioResult]:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def on_signal(sig: signal.Signals) -> None:
            if stopped_by:  # a second signal: no more waiting for graceful exits
                kill_all_now()
                return
            stopped_by.append(sig)
            task.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal, sig)
        try:
            return await engine.run(scenarios)
        except asyncio.CancelledError:
            if not stopped_by:
                raise
            return engine.results(interrupted=True)
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            closer = getattr(engine.evaluator, "aclose", None)
            if closer is not None:
                with contextlib.suppress(Exception):
                    await closer()

    try:
        results = asyncio.run(main())
    finally:
        kill_all_now()
    return results, (stopped_by[0] if stopped_by else None)


def _nothing_to_check(selected: list[Scenario], evaluator: LLMEvaluator | None) -> dict[str, str]:
    """Scenario id -> why it has nothing to check, with the judges this run configured."""
    judge_scripted = evaluator is not None and evaluator.judge_scripted
    run_judges = evaluator.run_judges if evaluator is not None else ()
    found = {}
    for scenario in selected:
        why = scenario.nothing_to_check(judge_scripted=judge_scripted, run_judges=run_judges)
        if why is not None:
            found[scenario.id] = why
    return found


def _relative_to_cwd(path: str) -> str:
    """Scenario paths as annotations and JUnit readers want them: relative to the checkout."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if relative.startswith("..") else relative


def _installed(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _parse_env(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise UsageError(f"--env {item!r}: expected KEY=VALUE")
    return key, value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


def _tag(text: str) -> tuple[str, str]:
    try:
        return parse_tag_selector(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


__all__ = ["EXIT_USAGE", "add_run_command", "run_main"]
