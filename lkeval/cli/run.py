"""``lkeval run``: load scenarios, run them against the agent, write results, report, gate.

Everything that can be checked is checked before the first agent boots: the agent file, the
scenario files, ``--python``, the output paths (writable, and no other run writing into the
same results directory), the LLM credentials and the judge. The results file is then written
whatever happens after the first scenario starts: on success, on a gate failure, and on
SIGINT/SIGTERM (then with ``interrupted: true`` and the attempts that finished), so no result
is ever lost.
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
from pathlib import Path
from typing import TextIO

from lkeval import __version__
from lkeval.agents.cold import python_problem
from lkeval.agents.launch import open_launcher
from lkeval.agents.orphans import adopt_orphans, kill_all_now
from lkeval.agents.process import AgentLaunch, agent_env, publish_pending_logs
from lkeval.cli.flags import add_llm_arguments, add_report_arguments, add_run_arguments
from lkeval.cli.options import RunOptions, run_options
from lkeval.cli.report import finish, load_baseline
from lkeval.errors import ExitCode, OutputError, UsageError
from lkeval.llm.config import MissingCredentialsError
from lkeval.llm.evaluator import LLMEvaluator, build_evaluator
from lkeval.llm.logs import route_livekit_logs
from lkeval.publish.files import ResultsDirLock, check_writable, write_text
from lkeval.publish.github.checkout import recorded_commit
from lkeval.publish.github.context import read_context
from lkeval.publish.github.fork import fork_error, not_run_reason, not_run_results
from lkeval.publish.progress import make_progress
from lkeval.results.model import (
    RunMetadata,
    RunResults,
    ScenarioResult,
    dump_results,
    run_start_mode,
)
from lkeval.results.pricing import PriceTable
from lkeval.results.sampling import SequentialRule
from lkeval.run.attempt import RunSettings
from lkeval.run.engine import (
    Engine,
    EngineOptions,
    attempt_factory,
    attempts_problem,
    default_concurrency,
)
from lkeval.run.revote import ask_again_with
from lkeval.scenarios.bounds import runs_problem
from lkeval.scenarios.loader import load_or_raise
from lkeval.scenarios.model import Scenario, min_pass_problem
from lkeval.scenarios.selection import Selection, check_selection, select_shard
from lkeval.text.commands import inert_line
from lkeval.text.masking import mask_results, redact_argv


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``run`` and its flags."""
    parser = sub.add_parser(
        "run",
        help="run scenarios against an agent and gate on the result",
        description="Boot the agent once per scenario through the LiveKit console, play the "
        "scenarios, judge them, write results and reports, and exit by the gate.",
    )
    add_run_arguments(parser)
    add_llm_arguments(parser)
    add_report_arguments(parser)
    parser.set_defaults(handler=_run_handler)


def _run_handler(args: argparse.Namespace) -> int:
    return run_main(run_options(args))


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What a run will do, all of it checked before anything boots."""

    scenarios: list[Scenario]
    selected: list[Scenario]
    results_path: Path
    logs_dir: Path
    engine_options: EngineOptions


def run_main(options: RunOptions, stream: TextIO | None = None) -> int:
    """The ``run`` subcommand; returns the exit code (errors go to the CLI boundary)."""
    out = stream if stream is not None else sys.stdout
    report = options.report
    plan = build_plan(options)
    check_writable([plan.results_path, plan.logs_dir / "fork-server.log", *_report_paths(options)])
    if not plan.selected:  # check_selection: the suite has some, so this shard has none
        return _empty_shard(options, plan, out)
    adopt_orphans()  # what a crashed agent leaves behind comes to us, stopped at the end
    problem = python_problem(options.python)  # before anything boots: one line, not N failures
    if problem is not None:
        raise UsageError(f"--python: {problem}")
    problem = (
        min_pass_problem(plan.selected, options.repeat, options.min_pass)
        or runs_problem(plan.selected, options.repeat, options.min_pass)
        or attempts_problem(plan.selected, plan.engine_options)
    )
    if problem is not None:
        raise UsageError(problem)
    if report.baseline:
        load_baseline(report.baseline)  # a bad baseline is exit 2 now, not after the whole run
    try:
        evaluator = build_evaluator(options.llm, plan.selected)  # credentials, before any boot
    except MissingCredentialsError as exc:
        if not (report.github and read_context().fork):
            raise
        return _fork_without_secrets(options, plan, exc, out)
    # the first lines name the caller and judge; a judge that cannot give a verdict stops here
    if evaluator is not None:
        route_livekit_logs(plan.logs_dir / "livekit-in-lkeval.log")  # not into the progress
    judge_check = evaluator.preflight(out) if evaluator is not None else None
    unchecked = _nothing_to_check(plan.selected, evaluator)
    plan = dataclasses.replace(
        plan, engine_options=dataclasses.replace(plan.engine_options, nothing_to_check=unchecked)
    )
    with ResultsDirLock(plan.results_path.parent):
        started_at = dt.datetime.now(dt.timezone.utc)
        started = time.monotonic()
        scenario_results, stopped_by = execute(options, plan, evaluator, out)
        metadata = dataclasses.replace(
            build_metadata(options, scenario_results, started_at, started, stopped_by),
            llms=evaluator.llms_in_use() if evaluator is not None else (),
            judge_check=judge_check,
        )
        results = mask_results(RunResults(metadata, tuple(scenario_results)))
        return _write_and_finish(options, plan, results, stopped_by, out)


def _write_and_finish(
    options: RunOptions,
    plan: _Plan,
    results: RunResults,
    stopped_by: signal.Signals | None,
    out: TextIO,
) -> int:
    """Write the results file, then the reports and the gate; a write error is raised last."""
    failure: OutputError | None = None
    try:
        write_text(plan.results_path, dump_results(results))  # masked by the caller
        out.write(f"results: {plan.results_path}\n")
    except OutputError as exc:  # the reports below are still written
        failure = exc
    out.write(f"logs: {plan.logs_dir}\n")
    report = options.report
    if stopped_by is not None:
        # JUnit and Markdown too (an interrupted run is still a complete report), but no
        # GitHub comment or summary: a cancelled job has seconds left, not a network round.
        report = dataclasses.replace(report, github=False)
    try:
        gate = finish(results, str(plan.results_path), report, out)
    except OutputError as exc:  # a full disk is exit 2 naming each file, never exit 4
        if failure is None:
            raise
        print(f"lk-eval: {exc}", file=sys.stderr)
    if failure is not None:
        raise failure
    if stopped_by is not None:
        print(
            f"lk-eval: interrupted by {stopped_by.name}; partial results written",
            file=sys.stderr,
        )
        return ExitCode.for_signal(stopped_by)
    return gate.exit_code


def build_plan(options: RunOptions) -> _Plan:
    """Load and select the scenarios and settle the paths; raises on bad input (exit 2)."""
    agent = Path(options.agent)
    if not agent.is_file():
        raise UsageError(f"--agent {options.agent}: no such file")
    groups, warnings = load_or_raise([_relative_to_cwd(p) for p in options.scenarios])
    for warning in warnings:
        print(inert_line(str(warning)), file=sys.stderr)  # may quote the scenario file
    scenarios = [s for g in groups for s in g.scenarios]
    selection = Selection(tags=options.tags, patterns=options.match)
    check_selection(scenarios, selection)  # the whole suite: exit 2 or 3 before anything boots
    if options.shard is not None:
        scenarios = select_shard(scenarios, *options.shard)
    results_path = Path(options.results)
    engine_options = EngineOptions(
        concurrency=options.concurrency or default_concurrency(),
        repeat=options.repeat,
        min_pass=options.min_pass,
        quarantine=options.quarantine,
        selection=selection,
        max_errors=options.max_errors,
        sampling=SequentialRule(max_attempts=options.max_attempts),
        max_run_attempts=options.max_run_attempts,
    )
    return _Plan(
        scenarios=scenarios,
        selected=[s for s in scenarios if engine_options.selection.selects(s)],
        results_path=results_path,
        logs_dir=Path(options.logs_dir) if options.logs_dir else results_path.parent / "logs",
        engine_options=engine_options,
    )


def _report_paths(options: RunOptions) -> list[str]:
    return [path for _, path in options.report.files]


def execute(
    options: RunOptions,
    plan: _Plan,
    evaluator: LLMEvaluator | None,
    stream: TextIO,
) -> tuple[list[ScenarioResult], signal.Signals | None]:
    """Start the launcher, run the engine until done or a signal; (results, signal)."""
    launch = AgentLaunch(
        agent=Path(options.agent).resolve(),
        python=options.python,
        env=dict(options.env),
        memory_limit_mib=options.agent_memory,
        log_limit_mib=options.agent_log_limit,
    )
    # Agents (and the fork server) write their raw logs here (private, 0700), never into the
    # results dir: logs/ only gets masked copies. A SIGKILL of lk-eval leaves this dir behind.
    raw_logs = Path(tempfile.mkdtemp(prefix="lkeval-raw-logs-"))
    launcher, start_line = open_launcher(
        launch.python,
        agent_env(launch),
        agent=launch.agent,
        cwd=launch.cwd,
        cold_start=options.cold_start,
        log_path=raw_logs / "fork-server.log",
        log_is_raw=True,
    )
    stream.write(start_line + "\n")
    unselected = len(plan.scenarios) - len(plan.selected)
    if unselected:  # one line for all of them; the progress counts what runs
        selection = plan.engine_options.selection.describe()
        line = (
            f"{len(plan.selected)} of {len(plan.scenarios)} scenarios selected ({selection}); "
            f"{unselected} not selected (reported skipped)"
        )
        stream.write(inert_line(line) + "\n")  # masked, inert
    stream.flush()
    try:
        # The scenario reaches each agent over its control channel, and each agent's own
        # directory sits beside its log.
        settings = RunSettings(
            launch=dataclasses.replace(launch, launcher=launcher, raw_log_dir=raw_logs),
            logs_dir=plan.logs_dir,
            work_dir=plan.logs_dir,
            boot_timeout=options.boot_timeout,
            turn_timeout=options.turn_timeout,
            max_turns=options.llm.max_turns,
            prices=PriceTable(dict(options.llm.prices)),
        )
        progress = make_progress(stream, github=options.report.github, total=len(plan.selected))
        engine = Engine(
            attempt_factory(settings, evaluator),
            progress,
            plan.engine_options,
            ask_again=ask_again_with(evaluator) if evaluator is not None else None,
        )
        return _run_until_signal(engine, plan.scenarios, evaluator)
    finally:
        launcher.close()
        # Agents killed on an interrupt: their logs are masked here, or never reach logs/.
        publish_pending_logs(raw_logs, plan.logs_dir)  # also the fork server's log
        shutil.rmtree(raw_logs, ignore_errors=True)


def build_metadata(
    options: RunOptions,
    scenario_results: list[ScenarioResult],
    started_at: dt.datetime,
    started: float,
    stopped_by: signal.Signals | None,
) -> RunMetadata:
    """The run's facts for the results file (argv with secrets redacted)."""
    commit = recorded_commit()  # no git binary needed (the Action's image has none)
    return RunMetadata(
        lkeval_version=__version__,
        livekit_agents_version=_installed("livekit-agents"),
        agent=str(options.agent),
        scenario_files=tuple(_relative_to_cwd(p) for p in options.scenarios),
        started_at=started_at.isoformat(timespec="seconds"),
        finished_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        duration_seconds=round(time.monotonic() - started, 3),
        git_sha=commit[0],
        git_branch=commit[1],
        shard=_shard(options),
        interrupted=stopped_by is not None,
        argv=redact_argv(sys.argv[1:]),
        start_mode=run_start_mode(scenario_results),
        sampling_rule=rule_record(options, scenario_results),
    )


def rule_record(options: RunOptions, scenario_results: list[ScenarioResult]) -> dict[str, float]:
    """The sequential test's parameters when a scenario ran it (``lkeval report`` recomputes)."""
    if not any(s.sampling and s.sampling.mode == "sequential" for s in scenario_results):
        return {}
    return dataclasses.asdict(SequentialRule(max_attempts=options.max_attempts))


def _shard(options: RunOptions) -> str | None:
    return f"{options.shard[0]}/{options.shard[1]}" if options.shard else None


def _fork_without_secrets(
    options: RunOptions,
    plan: _Plan,
    exc: MissingCredentialsError,
    out: TextIO,
) -> int:
    """A fork's PR has no secrets: write results saying so, publish them, exit by the gate."""
    out.write(fork_error(str(exc), os.environ, exc.variables) + "\n")
    out.flush()
    results = not_run_results(
        plan.scenarios,
        plan.engine_options.selection.selects,
        not_run_reason(os.environ, exc.variables),
        agent=str(options.agent),
        scenario_files=[_relative_to_cwd(p) for p in options.scenarios],
        commit=recorded_commit(),
        shard=_shard(options),
        argv=sys.argv[1:],
    )
    results = mask_results(results)
    write_text(plan.results_path, dump_results(results))
    out.write(f"results: {plan.results_path}\n")
    return finish(results, str(plan.results_path), options.report, out).exit_code


def _empty_shard(options: RunOptions, plan: _Plan, out: TextIO) -> int:
    """More shards than scenarios: this shard writes results that say it is empty, boots
    nothing, and passes; the merge of every shard's results is what is gated."""
    started_at = dt.datetime.now(dt.timezone.utc)
    why = f"not selected ({plan.engine_options.selection.describe()})"
    scenarios = [ScenarioResult.of(s, "skipped", why) for s in plan.scenarios]
    metadata = build_metadata(options, scenarios, started_at, time.monotonic(), None)
    results = RunResults(dataclasses.replace(metadata, empty_shard=True), tuple(scenarios))
    return _write_and_finish(options, plan, mask_results(results), None, out)


def _run_until_signal(
    engine: Engine, scenarios: list[Scenario], evaluator: LLMEvaluator | None
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
            if evaluator is not None:
                with contextlib.suppress(Exception):
                    await evaluator.aclose()

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


__all__ = ["add_command", "build_metadata", "build_plan", "execute", "run_main"]
