"""``lkeval dev``: the edit-and-rerun loop, scenarios played in this interpreter.

The run is ``lkeval run``'s (:class:`~lkeval.run.suite.Suite`: plan, checks, preflight,
engine, signals, results, reports, gate) with three differences: each attempt's agent is the
in-process player's (:mod:`lkeval.inproc`) instead of a process; one attempt per scenario
(``--repeat 1``) and one scenario at a time, no fork server; the conversation printed as it
happens (:class:`~lkeval.publish.live_transcript.LiveTranscript`) and the judge preflight kept
between runs of the same judge (:mod:`lkeval.llm.preflight_cache`). Its flags are ``run``'s
that make sense in one interpreter; ``[tool.lkeval]`` applies the same way (its other keys
are left out). docs/dev.md says what differs from the console.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from lkeval.cli.flags import add_llm_arguments, add_report_arguments, add_run_arguments
from lkeval.cli.options import RunOptions, run_options
from lkeval.cli.report import RunWriters
from lkeval.cli.run import suite_settings
from lkeval.llm.evaluator import LLMEvaluator, run_evaluator
from lkeval.publish.github.checkout import recorded_commit
from lkeval.run.engine import ProgressObserver
from lkeval.run.suite import Collaborators, Suite
from lkeval.scenarios.model import Scenario

#: Where ``lkeval dev`` writes by default: beside ``lkeval run``'s results, never over them.
DEV_RESULTS = "lkeval-results/dev/results.json"

#: ``run``'s flags ``dev`` takes (the others: a process, a fork server, audio, CI sharding,
#: cassettes, a baseline, budgets or GitHub, none of which one in-process loop has).
TAKES = frozenset(
    {
        "--agent",
        "--scenarios",
        "--results",
        "--logs-dir",
        "--no-settings",
        "--boot-timeout",
        "--turn-timeout",
        "--repeat",
        "--min-pass",
        "--inference-class",
        "--tag",
        "--match",
        "--quarantine",
        *("--caller-model", "--caller-base-url", "--caller-price"),
        *("--judge-model", "--judge-base-url", "--judge-price", "--judges"),
        *("--price", "--caller-temperature", "--rejudge", "--maybe-is-pass"),
        *("--allow-weak-judge", "--max-turns", "--llm-retries", "--llm-timeout"),
        *("--junit", "--markdown", "--fail-on", "--min-pass-rate"),
        *("--allow-nothing-to-check", "--allow-all-quarantined"),
    }
)


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``dev`` with the ``run`` flags it takes."""
    parser = sub.add_parser(
        "dev",
        help="play scenarios in this interpreter, for the edit-and-rerun loop",
        description="Play scenarios against the agent imported into this interpreter (its "
        "entrypoint and AgentServer unchanged): the same caller, checks, judges and veto as "
        "`lkeval run`, one attempt per scenario, the transcript printed as it happens. The "
        "agent's imports must resolve here (docs/dev.md).",
    )
    for title, actions in _run_flags():
        group = parser.add_argument_group(title)
        for action in actions:
            group._add_action(action)
    parser.add_argument(
        "--watch",
        action="store_true",
        help="stay running: play the scenarios again at each save of the agent's Python files "
        "or the scenario files (the agent's modules are imported again, livekit is not)",
    )
    parser.set_defaults(results=DEV_RESULTS, repeat=1, handler=_dev_handler)


def _run_flags() -> list[tuple[str | None, list[argparse.Action]]]:
    """``run``'s flag definitions ``dev`` takes, by ``run``'s groups (one source of truth)."""
    run = argparse.ArgumentParser(add_help=False)
    add_run_arguments(run)
    add_llm_arguments(run)
    add_report_arguments(run)
    groups = []
    for group in run._action_groups:
        taken = [a for a in group._group_actions if set(a.option_strings) & TAKES]
        for action in taken:
            if action.dest == "results":
                action.help = f"where to write the JSON results (default {DEV_RESULTS})"
            if action.dest == "repeat":
                action.help = "run every scenario N times (default 1; a scenario's own wins)"
        if taken:
            groups.append((group.title, taken))
    return groups


def _dev_handler(args: argparse.Namespace) -> int:
    options = dev_options(args)
    return watch_main(options) if args.watch else dev_main(options)


def watch_main(options: RunOptions, stream: TextIO | None = None) -> int:
    """``--watch``: play, then again at each edit, until Ctrl-C (or a signal during a run);
    the last run's exit code. A bad edit (a syntax error, a bad scenario file) is its one
    line, and the watch goes on."""
    from lkeval.errors import ExitCode, LkevalError
    from lkeval.inproc import loader, watch
    from lkeval.text.untrusted import inert_line

    out = stream if stream is not None else sys.stdout
    agent, scenarios = Path(options.agent), [Path(s) for s in options.scenarios]
    seen = watch.snapshot(agent, scenarios)
    code: int = ExitCode.PASSED
    try:
        while True:
            try:
                code = dev_main(options, out)
            except LkevalError as exc:  # masked, one line: the boundary's, minus the exit
                out.flush()
                print(inert_line(f"lk-eval: {exc}", 2000), file=sys.stderr, flush=True)
                code = exc.exit_code
            if code in (ExitCode.INTERRUPTED, ExitCode.TERMINATED):
                return code
            out.write(f"lk-eval: watching {agent.resolve().parent} (Ctrl-C to stop)\n")
            out.flush()
            seen = watch.wait_for_change(agent, scenarios, seen)
            loader.forget(agent)
    except KeyboardInterrupt:
        return code


def dev_options(args: argparse.Namespace) -> RunOptions:
    """``run``'s options from ``dev``'s flags: the others at their defaults, starts cold
    (no fork server), one conversation at a time, nothing for GitHub."""
    ns = argparse.Namespace(**vars(_defaults()))
    for name, value in vars(args).items():
        setattr(ns, name, value)
    ns.github = False
    return dataclasses.replace(run_options(ns), cold_start=True, concurrency=1)


@functools.cache
def _defaults() -> argparse.Namespace:
    run = argparse.ArgumentParser(add_help=False)
    add_run_arguments(run)
    add_llm_arguments(run)
    add_report_arguments(run)
    return run.parse_args(["--agent", "-", "--scenarios", "-"])


def dev_main(options: RunOptions, stream: TextIO | None = None) -> int:
    """The ``dev`` subcommand; returns the exit code (errors go to the CLI boundary).

    The agent is imported first: a module missing here is one line (exit 2) that says how
    to run an agent whose environment is not lk-eval's, before any LLM is asked anything.
    """
    # imported here: ``lkeval run`` loads the CLI too, and needs none of it
    from lkeval.inproc.agent import ConversationBegins, in_process_agents
    from lkeval.inproc.hooks import check_hooks
    from lkeval.inproc.loader import load_server
    from lkeval.publish.live_transcript import LiveTranscript

    out = stream if stream is not None else sys.stdout
    check_hooks(load_server(Path(options.agent)))
    shown: list[LiveTranscript] = []

    def progress(total: int) -> ProgressObserver:
        shown.append(LiveTranscript(out, total))
        return shown[-1]

    def echo(event: object) -> None:
        if not shown:
            return
        if isinstance(event, ConversationBegins):
            shown[-1].conversation_begins(event.scenario_id)
        else:
            shown[-1](event)

    collaborators = Collaborators(
        evaluator=functools.partial(_evaluator, options),
        progress=progress,
        writers=RunWriters(options.report, out),
        commit=recorded_commit,
        agents=in_process_agents(echo),
    )
    return Suite(suite_settings(options), collaborators, out).run()


def _evaluator(
    options: RunOptions, selected: Sequence[Scenario], logs_dir: Path
) -> LLMEvaluator | None:
    """``lkeval run``'s evaluator, its preflight kept between runs of the same judge."""
    evaluator = run_evaluator(options.llm, False, selected, logs_dir)
    if evaluator is not None:
        evaluator.cache_preflight = True
    return evaluator


__all__ = ["DEV_RESULTS", "add_command", "dev_main", "dev_options", "watch_main"]
