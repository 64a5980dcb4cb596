"""``lkeval merge``: join the results files of shards into one, for reports and the gate."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from lkeval.cli import UsageError
from lkeval.results.model import RunResults, load_results, write_results


def add_merge_command(sub: Any) -> None:
    """Register ``merge``."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "merge",
        help="merge shard results files into one",
        description="Merge the results files of `lkeval run --shard I/N` jobs into one file "
        "that `lkeval report` renders and gates.",
    )
    parser.add_argument("files", nargs="+", metavar="RESULTS.json")
    parser.add_argument("-o", "--output", required=True, metavar="PATH")
    parser.set_defaults(handler=merge_main)


def merge_results(parts: list[tuple[str, RunResults]]) -> RunResults:
    """One run from several shards: every scenario once, in file and line order."""
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
        interrupted=any(m.interrupted for m in metas),
    )
    return RunResults(metadata=merged, scenarios=tuple(scenarios))


def merge_main(args: argparse.Namespace) -> int:
    """Merge and write; bad inputs exit 2 through the CLI boundary."""
    parts = [(path, load_results(path)) for path in args.files]
    merged = merge_results(parts)
    write_results(merged, args.output)
    print(f"merged {len(parts)} file(s), {len(merged.scenarios)} scenario(s) into {args.output}")
    return 0
