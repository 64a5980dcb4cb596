"""``lkeval run``: parse the flags, build the run's collaborators, and hand over to the suite.

The run itself (plan, checks, preflight, agents, signals, results) is
:class:`lkeval.run.suite.Suite`; this module only turns options into its frozen settings and
builds what it is handed: the evaluator (:mod:`lkeval.llm`), the progress display, and the
writers (results file, reports, gate: :mod:`lkeval.publish`, :mod:`lkeval.cli.report`). A
fork's pull request without secrets is reported here, from the suite's plan.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TextIO

from lkeval import defaults
from lkeval.cli.flags import add_llm_arguments, add_report_arguments, add_run_arguments
from lkeval.cli.options import RunOptions, run_options
from lkeval.cli.report import BaselineError, finish, load_baseline, resolve_baseline
from lkeval.llm.config import MissingCredentialsError
from lkeval.llm.evaluator import LLMEvaluator, build_evaluator
from lkeval.llm.keyless import agent_placeholders, keyless_environ
from lkeval.llm.logs import route_livekit_logs
from lkeval.publish.files import ResultsDirLock, check_writable, write_text
from lkeval.publish.github.checkout import recorded_commit
from lkeval.publish.github.context import read_context
from lkeval.publish.github.fork import (
    empty_secrets,
    fork_error,
    fork_replay_notice,
    missing_secret_words,
    not_run_reason,
    not_run_results,
)
from lkeval.publish.github.remote_baseline import FetchedBaseline, is_remote
from lkeval.publish.github.restore_cassettes import restore_cassettes
from lkeval.publish.progress import make_progress
from lkeval.results.calibration import calibrated_errors
from lkeval.results.history import rolled, with_history
from lkeval.results.model import RunResults
from lkeval.results.results_json import dump_results
from lkeval.results.sampling import SequentialRule
from lkeval.run.engine import EngineOptions, ProgressObserver
from lkeval.run.plan import Plan, SuiteSettings
from lkeval.run.suite import Collaborators, Suite
from lkeval.scenarios.model import Scenario
from lkeval.scenarios.selection import Selection, shard_text
from lkeval.text.masking import mask_results


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


def run_main(options: RunOptions, stream: TextIO | None = None) -> int:
    """The ``run`` subcommand; returns the exit code (errors go to the CLI boundary)."""
    out = stream if stream is not None else sys.stdout
    report = options.report
    suite = Suite(suite_settings(options), _collaborators(options, out), out)
    if options.cassettes_from and options.cassettes and not options.no_credentials:
        restored = restore_cassettes(
            options.cassettes_from,
            Path(options.cassettes),
            artifact=options.cassettes_artifact,
            token=report.github_token,
        )
        out.write(restored + "\n")
    withheld = empty_secrets(os.environ)
    if withheld and _fork_with_cassettes(options):
        # a key the workflow passes arrived empty: the agent's too, so nothing goes live
        return _replay_fork(options, missing_secret_words(os.environ, withheld), out, stream)
    try:
        return suite.run()
    except MissingCredentialsError as exc:
        if suite.plan is None or not (report.github and read_context().fork):
            raise
        if _fork_with_cassettes(options):
            return _replay_fork(options, str(exc), out, stream)
        return _fork_without_secrets(options, suite, exc, out)


def _fork_with_cassettes(options: RunOptions) -> bool:
    """A fork's pull request run with cassettes, not yet switched to replaying them."""
    return (
        bool(options.cassettes)
        and not options.no_credentials
        and options.report.github
        and read_context().fork
    )


def _replay_fork(options: RunOptions, detail: str, out: TextIO, stream: TextIO | None) -> int:
    """A fork's PR without secrets, from its cassettes alone: what replays in full is
    evaluated, the rest is "not run: needs a live LLM" (docs/replay.md)."""
    out.write(fork_replay_notice(detail) + "\n")
    keyless = dataclasses.replace(options, cassette_mode="replay", no_credentials=True)
    return run_main(keyless, stream)


def suite_settings(options: RunOptions) -> SuiteSettings:
    """The run's frozen settings, built once from the options."""
    results_path = Path(options.results)
    return SuiteSettings(
        agent=options.agent,
        scenario_files=tuple(_relative_to_cwd(p) for p in options.scenarios),
        results_path=results_path,
        logs_dir=Path(options.logs_dir) if options.logs_dir else results_path.parent / "logs",
        report_paths=tuple(path for _, path in options.report.files),
        python=options.python,
        env=_agent_env(options),
        cold_start=options.cold_start,
        concurrency_given=options.concurrency is not None,
        inference_class=options.inference_class,
        agent_memory=options.agent_memory,
        agent_log_limit=options.agent_log_limit,
        shard=options.shard,
        engine=EngineOptions(
            concurrency=options.concurrency
            or defaults.default_concurrency(warm=not options.cold_start),
            repeat=options.repeat,
            min_pass=options.min_pass,
            quarantine=options.quarantine,
            selection=Selection(tags=options.tags, patterns=options.match),
            max_errors=options.max_errors,
            sampling=SequentialRule(max_attempts=options.max_attempts),
            max_run_attempts=options.max_run_attempts,
        ),
        boot_timeout=options.boot_timeout,
        turn_timeout=options.turn_timeout,
        max_turns=options.llm.max_turns,
        prices=options.llm.prices,
        argv=tuple(sys.argv[1:]),
        verdict_options=run_verdict_options(options),
        cassettes=Path(options.cassettes) if options.cassettes else None,
        cassette_mode=options.cassette_mode,
        cassette_rules=Path(options.cassette_rules) if options.cassette_rules else None,
        no_credentials=options.no_credentials,
    )


def _replaying(options: RunOptions) -> bool:
    """``--cassette-mode replay``: no call leaves the machine, so no key is needed."""
    return bool(options.cassettes) and options.cassette_mode == "replay"


def _agent_env(options: RunOptions) -> tuple[tuple[str, str], ...]:
    """``--env``, after a placeholder for each model key the agent lacks when replaying."""
    if not _replaying(options):
        return options.env
    given = {name for name, _ in options.env}
    filled = [(k, v) for k, v in agent_placeholders().items() if k not in given]
    return (*filled, *options.env)


def run_verdict_options(options: RunOptions) -> tuple[tuple[str, object], ...]:
    """The flags that change a verdict or the gate, recorded in the results' fingerprint:
    ``lkeval merge`` refuses shards run with different ones (``--shard`` aside)."""
    llm, report = options.llm, options.report
    return tuple(
        {
            "--judge-model": llm.judge.model,
            "--caller-model": llm.caller.model,
            "--judges": llm.judges,
            "--rejudge": llm.rejudge,
            "--maybe-is-pass": llm.maybe_is_pass,
            "--allow-weak-judge": llm.allow_weak_judge,
            "--max-turns": llm.max_turns,
            "--repeat": options.repeat,
            "--min-pass": options.min_pass,
            "--max-attempts": options.max_attempts,
            "--max-errors": options.max_errors,
            "--quarantine": options.quarantine,
            "--tag": options.tags,
            "--match": options.match,
            "--inference-class": options.inference_class,
            "--boot-timeout": options.boot_timeout,
            "--turn-timeout": options.turn_timeout,
            "--fail-on": report.fail_on,
            "--min-pass-rate": report.min_pass_rate,
            "--allow-nothing-to-check": report.allow_nothing_to_check,
            "--allow-all-quarantined": report.allow_all_quarantined,
        }.items()
    )


@dataclasses.dataclass(frozen=True)
class _Writers:
    """The run's outputs: the results file (atomic, 0644), the reports and the gate."""

    options: RunOptions
    out: TextIO

    def check_writable(self, paths: Sequence[Path]) -> None:
        check_writable(paths)

    #: The baseline resolved before the first boot (a fetch happens once), for ``finish``.
    baseline: list[FetchedBaseline] = dataclasses.field(default_factory=list)

    def check_baseline(self) -> dict[str, tuple[str, float]]:
        fetched = resolve_baseline(self.options.report)
        if fetched is not None:
            self.baseline.append(fetched)
        # The judge errors the baseline's history calibrated, for the engine's stopping rule
        # (lkeval.results.calibration); the engine checks each scenario's content digest.
        baseline = self._baseline_results()
        if baseline is None:
            return {}
        return calibrated_errors(rolled(baseline, self.options.report.history_runs), {})

    def lock(self, results_dir: Path) -> AbstractContextManager[object]:
        return ResultsDirLock(results_dir)

    def write_results(self, path: Path, results: RunResults) -> None:
        # The history this run is compared with, carried on so that the next run taking this
        # file as its baseline continues it (lkeval.results.history).
        report = self.options.report
        baseline = self._baseline_results()
        write_text(path, dump_results(with_history(results, baseline, report.history_runs)))

    def _baseline_results(self) -> RunResults | None:
        """The baseline's results as resolved before the first boot (a fetched one is not
        fetched again); a file not read yet (a signal before then) is read now, if it can be."""
        if self.baseline:
            fetched = self.baseline[0].results
            return mask_results(fetched) if fetched is not None else None
        spec = self.options.report.baseline
        if not spec or is_remote(spec):
            return None
        try:
            return mask_results(load_baseline(spec))
        except BaselineError:  # gone now: the results come first
            return None

    def finish(self, results: RunResults, path: Path, interrupted: bool) -> int:
        report = self.options.report
        if interrupted:
            # JUnit and Markdown too (an interrupted run is still a complete report), but no
            # GitHub comment or summary: a cancelled job has seconds left, not a network round.
            report = dataclasses.replace(report, github=False)
        baseline = self.baseline[0] if self.baseline else None
        if baseline is None and interrupted and is_remote(report.baseline):
            # Stopped before it was fetched: no network round in a cancelled job's last seconds.
            baseline = FetchedBaseline(None, missing="not fetched (the run was interrupted)")
        return finish(results, str(path), report, self.out, baseline).exit_code


def _collaborators(options: RunOptions, out: TextIO) -> Collaborators:
    def evaluator(selected: Sequence[Scenario], logs_dir: Path) -> LLMEvaluator | None:
        environ = keyless_environ(options.llm, selected) if _replaying(options) else None
        built = build_evaluator(options.llm, selected, environ)  # credentials, before any boot
        if built is not None:
            route_livekit_logs(logs_dir / "livekit-in-lkeval.log")  # not into the progress
        return built

    def progress(total: int) -> ProgressObserver:
        return make_progress(out, github=options.report.github, total=total)

    return Collaborators(
        evaluator=evaluator,
        progress=progress,
        writers=_Writers(options, out),
        commit=recorded_commit,  # no git binary needed (the Action's image has none)
    )


def _fork_without_secrets(
    options: RunOptions,
    suite: Suite,
    exc: MissingCredentialsError,
    out: TextIO,
) -> int:
    """A fork's PR has no secrets: write results saying so, publish them, exit by the gate."""
    plan: Plan | None = suite.plan
    assert plan is not None
    settings = suite.settings
    out.write(fork_error(str(exc), os.environ, exc.variables) + "\n")
    out.flush()
    results = not_run_results(
        plan.scenarios,
        plan.engine_options.selection,
        not_run_reason(os.environ, exc.variables),
        agent=str(options.agent),
        scenario_files=list(settings.scenario_files),
        commit=recorded_commit(),
        shard=shard_text(settings.shard),
        argv=sys.argv[1:],
    )
    results = mask_results(results)
    write_text(settings.results_path, dump_results(results))
    out.write(f"results: {settings.results_path}\n")
    return finish(results, str(settings.results_path), options.report, out).exit_code


def _relative_to_cwd(path: str) -> str:
    """Scenario paths as annotations and JUnit readers want them: relative to the checkout."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if relative.startswith("..") else relative


__all__ = ["add_command", "run_main", "suite_settings"]
