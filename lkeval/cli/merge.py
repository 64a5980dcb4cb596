"""``lkeval merge``: join the results files of shards into one, for reports and the gate."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Iterable, Sequence

from lkeval.errors import ExitCode, UsageError
from lkeval.publish.files import write_text
from lkeval.results.model import (
    RunMetadata,
    RunResults,
    ScenarioResult,
    SuiteFingerprint,
    run_inference_class,
)
from lkeval.results.results_json import dump_results, load_results
from lkeval.text.untrusted import inert_line, one_line


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``merge``."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "merge",
        help="merge shard results files into one",
        description="Merge the results files of `lkeval run --shard I/N` jobs into one file "
        "that `lkeval report` renders and gates.",
    )
    parser.add_argument("files", nargs="+", metavar="RESULTS.json")
    parser.add_argument("-o", "--output", required=True, metavar="PATH")
    parser.add_argument(
        "--allow-partial",
        action="store_true",
        help="merge even when some shards of the run are missing; the merged results say "
        "so and their gate never passes",
    )
    parser.set_defaults(
        handler=lambda args: merge_main(args.files, args.output, args.allow_partial)
    )


def _name(source: str, meta: RunMetadata) -> str:
    return f"shard {meta.shard} ({source})" if meta.shard else source


def _suite_difference(first: SuiteFingerprint, other: SuiteFingerprint) -> str:
    """Which scenario makes two suites differ ("" when they are the same)."""
    for sid, digest in other.scenarios.items():
        if sid not in first.scenarios:
            return f"scenario {sid!r} is not in the other's suite"
        if first.scenarios[sid] != digest:
            return f"scenario {sid!r} differs"
    for sid in first.scenarios:
        if sid not in other.scenarios:
            return f"scenario {sid!r} is missing from its suite"
    return ""


def _option_difference(first: SuiteFingerprint, other: SuiteFingerprint) -> str:
    for key in sorted(set(first.options) | set(other.options)):
        a, b = first.options.get(key, "(not recorded)"), other.options.get(key, "(not recorded)")
        if a != b:
            return f"{key} {a} → {b}"
    return ""


def _models(meta: RunMetadata) -> dict[str, str]:
    """The caller's and judge's model by role (the host's port changes from job to job)."""
    return {llm.role: llm.model for llm in meta.llms}


def merge_problem(parts: Sequence[tuple[str, RunMetadata]]) -> str:
    """Why these results files are not parts of one run ("" when they are): a file without a
    fingerprint, another lk-eval, another commit, another suite, other options or models."""
    for source, meta in parts:
        if meta.suite is None and meta.interrupted:
            return f"{source} was interrupted before its scenarios were loaded: re-run that shard"
        if meta.suite is None:
            return (
                f"{source} has no suite fingerprint (written by lk-eval "
                f"{meta.lkeval_version or 'unknown'}, before merge checked what shards ran): "
                "re-run every shard with this lk-eval, or `lkeval report` each file on its own"
            )
    first_source, first = parts[0]
    assert first.suite is not None
    head = _name(first_source, first)
    for source, meta in parts[1:]:
        assert meta.suite is not None
        name = _name(source, meta)
        if meta.lkeval_version != first.lkeval_version:
            return (
                f"shards ran different lk-eval versions {first.lkeval_version} → "
                f"{meta.lkeval_version} ({head}, {name})"
            )
        if meta.git_sha != first.git_sha:
            return (
                f"shards ran different commits {first.git_sha or '(none)'} → "
                f"{meta.git_sha or '(none)'} ({head}, {name})"
            )
        suite = _suite_difference(first.suite, meta.suite)
        if suite:
            return f"{name} ran another suite than {head}: {suite}"
        option = _option_difference(first.suite, meta.suite)
        if option:
            return f"{name} ran with other options than {head}: {option}"
        mine, theirs = _models(first), _models(meta)
        for role in sorted(set(mine) & set(theirs)):  # an empty shard starts no LLM
            if mine[role] != theirs[role]:
                return f"{name} ran another {role} model than {head}: {mine[role]} → {theirs[role]}"
    return ""


def uncovered(meta: RunMetadata, scenario_ids: Iterable[str]) -> list[str]:
    """The scenarios of the fingerprinted suite that no merged file holds."""
    held = set(scenario_ids)
    return [sid for sid in (meta.suite.scenarios if meta.suite else {}) if sid not in held]


def missing_shards(parts: list[tuple[str, RunResults]]) -> list[str]:
    """The shards ``I/N`` of the run that none of the files holds (empty when complete or
    when the files are not shards)."""
    shards = {source: r.metadata.shard for source, r in parts if r.metadata.shard}
    totals = {shard.split("/")[1] for shard in shards.values()}
    if len(totals) > 1:
        listed = ", ".join(f"{src} ({shard})" for src, shard in shards.items())
        raise UsageError(f"the files are shards of different splits: {listed}")
    if not totals:
        return []
    total = int(totals.pop())
    present = {int(shard.split("/")[0]) for shard in shards.values()}
    return [f"{i}/{total}" for i in range(1, total + 1) if i not in present]


def _each_scenario_once(
    parts: list[tuple[str, RunResults]],
) -> tuple[dict[str, str], list[ScenarioResult]]:
    """(scenario id -> the file it came from, the scenarios in file and line order); a
    scenario in two files is refused."""
    seen: dict[str, str] = {}
    scenarios = []
    for source, results in parts:
        for scenario in results.scenarios:
            if scenario.scenario_id in seen:
                raise UsageError(
                    f"scenario {scenario.scenario_id!r} is in both {seen[scenario.scenario_id]} "
                    f"and {source}; were the shards run with the same --shard N?"
                )
            seen[scenario.scenario_id] = source
            scenarios.append(scenario)
    scenarios.sort(key=lambda s: (s.file, s.line))
    return seen, scenarios


def merge_results(parts: list[tuple[str, RunResults]], allow_partial: bool = False) -> RunResults:
    """One run from several shards: every scenario once, in file and line order.

    Files that are not parts of one run (another suite, lk-eval, commit or verdict options:
    :func:`merge_problem`) are refused. A missing shard is refused
    (a gate on part of the suite passes what never ran) unless ``allow_partial``; then the
    merged metadata names the missing shards.
    """
    problem = merge_problem([(source, r.metadata) for source, r in parts])
    if problem:
        raise UsageError(f"refusing to merge: {problem}")
    seen, scenarios = _each_scenario_once(parts)
    missing = missing_shards(parts)
    if missing and not allow_partial:
        raise UsageError(
            f"shard(s) {', '.join(missing)} missing from the merge; pass every shard's "
            "results file, or --allow-partial to merge anyway (the gate then fails)"
        )
    left_out = uncovered(parts[0][1].metadata, seen)
    if left_out and not (allow_partial and missing):  # partial: the gate fails
        more = f" (and {len(left_out) - 1} more)" if len(left_out) > 1 else ""
        raise UsageError(
            f"refusing to merge: scenario {left_out[0]!r}{more} of the suite is in none of "
            "the files; pass every shard's results file"
        )
    suite = first_suite.scenarios if (first_suite := parts[0][1].metadata.suite) else {}
    stray = [sid for sid in seen if sid not in suite]
    if stray:
        raise UsageError(
            f"refusing to merge: scenario {stray[0]!r} of {seen[stray[0]]} is not in the "
            "suite its fingerprint names"
        )
    metas = [r.metadata for _, r in parts]
    files = tuple(dict.fromkeys(f for m in metas for f in m.scenario_files))
    first = metas[0]
    merged = dataclasses.replace(
        first,
        scenario_files=files,
        started_at=min(m.started_at for m in metas),
        finished_at=max(m.finished_at for m in metas),
        duration_seconds=max(m.duration_seconds for m in metas),
        shard=None,
        empty_shard=False,
        interrupted=any(m.interrupted for m in metas),
        missing_shards=tuple(missing),
        inference_class=run_inference_class(scenarios),
    )
    # Every shard carries the history of the same baseline: the merge carries it on.
    history = next((r.history for _, r in parts if r.history is not None), None)
    return RunResults(metadata=merged, scenarios=tuple(scenarios), history=history)


def merge_main(files: list[str], output: str, allow_partial: bool = False) -> ExitCode:
    """Merge and write; bad inputs exit 2 through the CLI boundary."""
    parts = [(path, load_results(path)) for path in files]
    merged = merge_results(parts, allow_partial=allow_partial)
    write_text(output, dump_results(merged))  # masked as it leaves the process
    counts = f"{len(parts)} file(s), {len(merged.scenarios)} scenario(s)"
    print(one_line(f"merged {counts} into {output}"))
    if merged.metadata.missing_shards:
        missing = ", ".join(merged.metadata.missing_shards)
        # shard names come from the results files: one inert line
        print(inert_line(f"lk-eval: partial merge: shard(s) {missing} missing"), file=sys.stderr)
    return ExitCode.PASSED
