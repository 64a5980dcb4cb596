"""``lkeval calibrate``: the judge measured per scenario, on negative controls.

Reads a results file (a default-branch run), takes each scenario's first transcript the
conversation judge passed, builds its negative controls (:mod:`lkeval.results.controls`), asks
the judge about them and about the transcript itself (:mod:`lkeval.llm.calibrate`), and writes
the results file back with each scenario's :class:`~lkeval.results.model.Calibration`. A later
run that takes that file as its ``--baseline`` carries the calibrations in its history and its
stopping rule assumes each scenario's measured judge error (``docs/sampling.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from lkeval.cli import options as opt
from lkeval.cli.flags import add_llm_arguments
from lkeval.errors import ConfigError, NothingToRunError
from lkeval.llm.calibrate import calibrate_scenario
from lkeval.llm.config import LLMOptions
from lkeval.llm.evaluator import LLMEvaluator, build_evaluator
from lkeval.publish.files import write_text
from lkeval.results.calibration import cannot_tell, describe_calibration
from lkeval.results.consistency import status_problem
from lkeval.results.model import Calibration, RunResults, ScenarioResult, TranscriptItem
from lkeval.results.results_json import ResultsFileError, dump_results, load_results
from lkeval.results.sampling import JUDGE_SOURCE
from lkeval.scenarios.loader import load_or_raise
from lkeval.scenarios.model import Scenario
from lkeval.text.masking import mask_results
from lkeval.text.untrusted import inert_line, one_line

DEFAULT_VOTES = 10
MAX_VOTES = 50
CONCURRENCY = 4


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lkeval calibrate --results FILE --scenarios FILE...``."""
    parser = sub.add_parser(
        "calibrate",
        help="measure the judge per scenario on negative controls of passing transcripts",
        description="Ask the judge about each scenario's passing transcript in a results file "
        "and about known-bad variants of it (tool call dropped, values changed, confirmation "
        "removed, a refusal); write its false-pass and false-fail counts into the results file, "
        "which a later run's --baseline carries to its stopping rule.",
    )
    parser.add_argument("--results", required=True, metavar="PATH", help="results.json to read")
    parser.add_argument(
        "--scenarios",
        required=True,
        nargs="+",
        metavar="SCENARIOS.yaml",
        help="the scenario files the run used (for each scenario's expectations)",
    )
    parser.add_argument(
        "--votes",
        type=opt.positive_int_up_to(MAX_VOTES),
        default=DEFAULT_VOTES,
        metavar="N",
        help="judge calls per negative control; the passing transcript is asked as often as "
        f"all its controls together (default %(default)s, at most {MAX_VOTES})",
    )
    parser.add_argument(
        "--output",
        metavar="PATH",
        help="where to write the calibrated results file (default: --results, in place)",
    )
    add_llm_arguments(parser)
    parser.set_defaults(handler=_handler)


def _handler(args: argparse.Namespace) -> int:
    return calibrate_main(
        args.results, args.scenarios, args.votes, args.output or args.results, opt.llm_options(args)
    )


def calibrate_main(
    results_path: str,
    scenario_files: Sequence[str],
    votes: int,
    output: str,
    llm: LLMOptions,
    stream: TextIO | None = None,
) -> int:
    """Calibrate every scenario that has a transcript the judge passed; exit 0, or 3 when
    none could be."""
    out = stream if stream is not None else sys.stdout
    results = mask_results(load_results(results_path))
    problem = status_problem(results)
    if problem:
        raise ResultsFileError(f"{results_path}: {problem}")
    groups, _ = load_or_raise(list(scenario_files))
    scenarios = {s.id: s for g in groups for s in g.scenarios}
    todo, notes = _pairs(results, scenarios)
    for note in notes:
        out.write(inert_line(f"calibrate: {note}") + "\n")
    if not todo:
        raise NothingToRunError(
            "nothing to calibrate: no scenario has a transcript the conversation judge passed "
            "whose scenario is unchanged since the run"
        )
    evaluator = build_evaluator(llm, [s for s, _ in todo])
    if evaluator is None or evaluator.judge_spec is None:
        raise ConfigError("calibrate needs the conversation judge (--judge-model)")
    model = evaluator.judge_spec.model
    found = asyncio.run(_ask(evaluator, todo, votes, model))
    calibrated = {sid: c for sid, c in found.items() if c is not None}
    for scenario, _ in todo:
        got = calibrated.get(scenario.id)
        line = describe_calibration(got) if got else "no vote could be had: not calibrated"
        if got is not None and cannot_tell(got):
            line += " — the judge cannot tell this scenario's good conversations from broken ones"
        out.write(inert_line(f"calibrate: {scenario.label}: {line}", 2000) + "\n")
    updated = tuple(
        dataclasses.replace(s, calibration=calibrated[s.scenario_id])
        if s.scenario_id in calibrated
        else s
        for s in results.scenarios
    )
    write_text(Path(output), dump_results(dataclasses.replace(results, scenarios=updated)))
    out.write(one_line(f"calibrated {len(calibrated)} of {len(todo)} scenario(s): {output}") + "\n")
    if not calibrated:
        raise NothingToRunError("nothing could be calibrated: the judge gave no vote")
    return 0


def _pairs(
    results: RunResults, scenarios: dict[str, Scenario]
) -> tuple[list[tuple[Scenario, tuple[TranscriptItem, ...]]], list[str]]:
    """(scenario, passing transcript) for each scenario that can be calibrated, and a note
    on each one that cannot."""
    digests = results.metadata.suite.scenarios if results.metadata.suite else {}
    todo = []
    notes = []
    for result in results.scenarios:
        scenario = scenarios.get(result.scenario_id)
        transcript = _passing_transcript(result)
        if transcript is None:
            continue
        if scenario is None or digests.get(scenario.id) != scenario.digest:
            notes.append(f"{result.label}: the scenario changed since the run; not calibrated")
            continue
        todo.append((scenario, transcript))
    return todo, notes


def _passing_transcript(result: ScenarioResult) -> tuple[TranscriptItem, ...] | None:
    """The first attempt's transcript that the conversation judge passed (None without)."""
    for attempt in result.attempts:
        judged = [v for v in attempt.verdicts if v.source == JUDGE_SOURCE]
        passed = attempt.status == "passed" and judged and judged[0].verdict == "pass"
        if passed and attempt.transcript:
            return attempt.transcript
    return None


async def _ask(
    evaluator: LLMEvaluator,
    todo: list[tuple[Scenario, tuple[TranscriptItem, ...]]],
    votes: int,
    model: str,
) -> dict[str, Calibration | None]:
    slots = asyncio.Semaphore(CONCURRENCY)
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    try:
        found = await asyncio.gather(
            *(calibrate_scenario(evaluator, s, t, votes, slots, model, now) for s, t in todo)
        )
    finally:
        await evaluator.aclose()
    return {s.id: c for (s, _), c in zip(todo, found, strict=True)}


__all__ = ["add_command", "calibrate_main"]
