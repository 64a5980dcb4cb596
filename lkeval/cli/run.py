"""``lkeval run``: parse the flags, build the run's collaborators, and hand over to the suite.

The run itself (plan, checks, preflight, agents, signals, results) is
:class:`lkeval.run.suite.Suite`; this module only turns options into its frozen settings and
builds what it is handed: the evaluator (:func:`lkeval.llm.evaluator.run_evaluator`), the
progress display, and the writers (results file, reports, gate:
:class:`lkeval.cli.report.RunWriters`). A
fork's pull request without the LLM credentials it needs is decided here before the run starts
(:func:`fork_mode`): it replays its cassettes with no key, or is reported not run.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple, TextIO

from lkeval import defaults
from lkeval.cli.flags import add_llm_arguments, add_report_arguments, add_run_arguments
from lkeval.cli.options import RunOptions, run_options, sensitivity_rule
from lkeval.cli.report import RunWriters, finish
from lkeval.errors import LkevalError
from lkeval.llm.config import MissingCredentialsError
from lkeval.llm.evaluator import missing_credentials, run_evaluator
from lkeval.llm.placeholders import agent_placeholders
from lkeval.publish.files import ResultsDirLock, write_text
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
from lkeval.publish.github.restore_cassettes import restore_cassettes
from lkeval.publish.progress import make_progress
from lkeval.results.results_json import dump_results
from lkeval.run.early_start import EARLY
from lkeval.run.engine import EngineOptions, ProgressObserver
from lkeval.run.plan import Plan, SuiteSettings, build_plan
from lkeval.run.suite import Collaborators, Suite
from lkeval.scenarios.model import Selection, shard_text
from lkeval.text.masking import mask_results
from lkeval.text.untrusted import one_line


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
    if options.cassettes_from and options.cassettes and options.cassettes_restored is None:
        return _with_restored_cassettes(options, out, stream)
    fork = fork_mode(options, os.environ)
    if isinstance(fork, ForkNotRun):
        return _fork_without_secrets(options, fork, out)
    if isinstance(fork, ForkReplay):  # nothing goes live: the agent gets placeholders too
        out.write(fork_replay_notice(fork.detail) + "\n")
        options = dataclasses.replace(options, cassette_mode="replay", no_credentials=True)
    return Suite(suite_settings(options), _collaborators(options, out), out).run()


class ForkReplay(NamedTuple):
    """A fork's pull request without the LLM credentials it needs, with cassettes: what
    replays in full is evaluated, the rest is "not run: needs a live LLM" (docs/replay.md)."""

    detail: str
    """Why: the secrets that arrived empty, or the credentials missing."""


class ForkNotRun(NamedTuple):
    """A fork's pull request without the LLM credentials it needs, and no cassettes: every
    selected scenario is reported not run, saying why, and no agent boots."""

    plan: Plan
    missing: MissingCredentialsError


def fork_mode(options: RunOptions, environ: Mapping[str, str]) -> ForkReplay | ForkNotRun | None:
    """How a run on a fork's pull request goes, decided before it starts (None: as any run).

    GitHub gives a fork's runs no secrets: a secret the workflow passes arrives empty. With
    cassettes, the run replays them with no key; without, it reports every scenario not run.
    Scenarios that cannot be loaded, or that need no key, run as any run does (the suite then
    reports what is wrong with them)."""
    if options.no_credentials or not (options.report.github and read_context(environ).fork):
        return None
    withheld = empty_secrets(environ)
    if withheld and options.cassettes:
        return ForkReplay(missing_secret_words(environ, withheld))
    settings = suite_settings(options)
    try:
        plan = build_plan(settings.agent, settings.scenario_files, settings.engine, settings.shard)
    except LkevalError:
        return None
    missing = missing_credentials(options.llm, plan.selected, environ)
    if missing is None:
        return None
    return ForkReplay(str(missing)) if options.cassettes else ForkNotRun(plan, missing)


def _with_restored_cassettes(options: RunOptions, out: TextIO, stream: TextIO | None) -> int:
    """The run with ``--cassettes-from``'s artifact unpacked into a directory made fresh for
    it (and removed after): what is replayed is exactly what the artifact brought and its
    manifest lists, never a file of the checkout's ``--cassettes DIR`` (docs/replay.md)."""
    assert options.cassettes_from and options.cassettes
    fresh = Path(tempfile.mkdtemp(prefix="lkeval-restored-cassettes-"))
    try:
        try:
            with EARLY.interruptible():  # a Ctrl-C cuts the download short, and is kept
                line, trusted = restore_cassettes(
                    options.cassettes_from,
                    fresh,
                    artifact=options.cassettes_artifact,
                    token=options.report.github_token,
                )
        except KeyboardInterrupt:
            if not EARLY.signal_pending:
                raise
            # the run takes the signal: every scenario "not run (interrupted)", 130/143
            return Suite(suite_settings(options), _collaborators(options, out), out).run()
        out.write(one_line(line) + "\n")  # names the branch the input gave
        directory = Path(options.cassettes)
        checkout = sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []
        if checkout:
            out.write(
                f"cassettes: the {len(checkout)} file(s) already in {directory} are not "
                "replayed (only what the restored artifact's manifest lists is)\n"
            )
        restored = dataclasses.replace(options, cassettes_restored=(fresh, trusted))
        return run_main(restored, stream)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)


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
        mode=options.mode,
        speech=options.speech,
        voice=options.voice,
        impair=options.impair,
        listen=options.listen,
        agent_memory=options.agent_memory,
        agent_log_limit=options.agent_log_limit,
        shard=options.shard,
        engine=EngineOptions(
            concurrency=options.concurrency
            or defaults.default_concurrency(
                warm=not options.cold_start, audio=options.mode == "audio"
            ),
            repeat=options.repeat,
            min_pass=options.min_pass,
            quarantine=options.quarantine,
            selection=Selection(tags=options.tags, patterns=options.match),
            max_errors=options.max_errors,
            sampling=sensitivity_rule(options.report.catch, options.max_attempts),
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
        cassettes_restored=options.cassettes_restored,
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
            "--catch": options.report.catch,
            "--max-errors": options.max_errors,
            "--quarantine": options.quarantine,
            "--tag": options.tags,
            "--match": options.match,
            "--inference-class": options.inference_class,
            "--mode": options.mode,
            "--impair": options.impair,
            "--boot-timeout": options.boot_timeout,
            "--turn-timeout": options.turn_timeout,
            "--fail-on": report.fail_on,
            "--min-pass-rate": report.min_pass_rate,
            "--allow-nothing-to-check": report.allow_nothing_to_check,
            "--allow-all-quarantined": report.allow_all_quarantined,
        }.items()
    )


def _collaborators(options: RunOptions, out: TextIO) -> Collaborators:
    def progress(total: int) -> ProgressObserver:
        return make_progress(out, github=options.report.github, total=total)

    return Collaborators(
        evaluator=functools.partial(run_evaluator, options.llm, _replaying(options)),
        progress=progress,
        writers=RunWriters(options.report, out),
        commit=recorded_commit,  # no git binary needed (the Action's image has none)
    )


def _fork_without_secrets(options: RunOptions, fork: ForkNotRun, out: TextIO) -> int:
    """A fork's PR has no secrets: write results saying so, publish them, exit by the gate."""
    EARLY.discard()  # a fork server started before the imports: nothing boots
    plan, exc = fork
    settings = suite_settings(options)
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
    with ResultsDirLock(settings.results_path.parent):  # one run per results directory
        write_text(settings.results_path, dump_results(results))
        out.write(one_line(f"results: {settings.results_path}") + "\n")
        return finish(results, str(settings.results_path), options.report, out).exit_code


def _relative_to_cwd(path: str) -> str:
    """Scenario paths as annotations and JUnit readers want them: relative to the checkout."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if relative.startswith("..") else relative


__all__ = ["ForkNotRun", "ForkReplay", "add_command", "fork_mode", "run_main", "suite_settings"]
