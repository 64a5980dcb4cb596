"""Sharding a suite across CI machines and merging the shards back (no agents: fast).

The matrix relies on four properties: every scenario lands in exactly one shard, shards are
balanced, the split does not depend on the order scenarios are listed in (or on the run), and
merging the shards' results gives what one unsharded run would have written.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
import yaml
from conftest import clean_env, run_lkeval
from report_fixtures import write_results as write

from lkeval.cli.merge import merge_results, missing_shards
from lkeval.cli.options import parse_shard
from lkeval.errors import UsageError
from lkeval.results.model import Attempt, RunMetadata, RunResults, ScenarioResult, SuiteFingerprint
from lkeval.results.results_json import load_results
from lkeval.scenarios.loader import load_or_raise
from lkeval.scenarios.model import Scenario, select_shard

STATUSES = ("passed", "failed", "error", "skipped")


@pytest.fixture
def scenarios(tmp_path: Path) -> list[Scenario]:
    """23 scenarios in two files; some with written ids, most with derived ones."""

    def group(name: str, count: int, with_ids: bool) -> dict:
        return {
            "name": name,
            "scenarios": [
                {
                    **({"id": f"SCN_{name[:3]}{k:02d}"} if with_ids and k % 2 else {}),
                    "label": f"{name} case {k}",
                    "instructions": "hi",
                }
                for k in range(count)
            ],
        }

    files = []
    for name, count, with_ids in (("Booking", 14, True), ("Cancellation", 9, False)):
        path = tmp_path / f"{name.lower()}.yaml"
        path.write_text(yaml.safe_dump(group(name, count, with_ids), sort_keys=False))
        files.append(path)
    groups, _ = load_or_raise(files)
    found = [s for g in groups for s in g.scenarios]
    assert len(found) == 23
    return found


def _ids(scenarios: list[Scenario]) -> list[str]:
    return [s.id for s in scenarios]


@pytest.mark.parametrize("total", [1, 2, 3, 4, 5, 7, 23, 30])
def test_shards_cover_every_scenario_once_and_are_balanced(
    scenarios: list[Scenario], total: int
) -> None:
    shards = [select_shard(scenarios, i, total) for i in range(1, total + 1)]
    every = [sid for shard in shards for sid in _ids(shard)]
    assert sorted(every) == sorted(_ids(scenarios))  # exactly once each
    sizes = [len(shard) for shard in shards]
    assert max(sizes) - min(sizes) <= 1
    for shard in shards:  # each shard keeps the file order the user wrote
        assert _ids(shard) == [sid for sid in _ids(scenarios) if sid in set(_ids(shard))]


def test_shards_are_stable_across_runs_and_input_order(scenarios: list[Scenario]) -> None:
    first = [set(_ids(select_shard(scenarios, i, 4))) for i in range(1, 5)]
    again = [set(_ids(select_shard(scenarios, i, 4))) for i in range(1, 5)]
    assert first == again
    rng = random.Random(7)
    for _ in range(5):
        shuffled = scenarios[:]
        rng.shuffle(shuffled)
        assert [set(_ids(select_shard(shuffled, i, 4))) for i in range(1, 5)] == first


@pytest.mark.parametrize("text", ["0/4", "5/4", "1/0", "a/b", "3", "1/-2"])
def test_bad_shard_specs_are_rejected(text: str) -> None:

    with pytest.raises(ValueError):
        parse_shard(text)


def _result(s: Scenario, k: int) -> ScenarioResult:
    status = STATUSES[k % len(STATUSES)]
    return ScenarioResult(
        scenario_id=s.id,
        label=s.label,
        group_id=s.group_id,
        group_name=s.group_name,
        file=s.file,
        line=s.line,
        status=status,
        id_derived=s.id_derived,
        reason="" if status == "passed" else f"reason {k}",
        attempts=(Attempt(status=status, boot_seconds=0.2 + k, duration_seconds=1.0 + k),),
        duration_seconds=1.0 + k,
    )


def _metadata(
    shard: str | None, started: str, duration: float, scenarios: list[Scenario]
) -> RunMetadata:
    """Every shard carries the whole suite's fingerprint (merge refuses files without one)."""
    suite = SuiteFingerprint.of(scenarios, [("--repeat", "1")])
    return RunMetadata(
        lkeval_version="0",
        livekit_agents_version="1.8.9",
        agent="agent.py",
        scenario_files=("booking.yaml", "cancellation.yaml"),
        started_at=started,
        finished_at=started,
        duration_seconds=duration,
        shard=shard,
        suite=suite,
    )


def test_the_fingerprint_records_the_verdict_options_as_text_by_flag() -> None:
    """What ``lkeval merge`` compares: every option as text, in flag order, whatever order and
    type the run handed them in (a job that lists them otherwise must still agree)."""
    suite = SuiteFingerprint.of(
        [],
        [
            ("--repeat", None),
            ("--maybe-is-pass", True),
            ("--judges", ("task_completion", "tool_use")),
            ("--tag", ()),
            ("--judge-model", "gpt-4.1-mini"),
            ("--min-pass-rate", 0.9),
        ],
    )
    assert list(suite.options.items()) == [
        ("--judge-model", "gpt-4.1-mini"),
        ("--judges", '["task_completion", "tool_use"]'),
        ("--maybe-is-pass", "true"),
        ("--min-pass-rate", "0.9"),
        ("--repeat", "(default)"),
        ("--tag", "(none)"),
    ]


def test_merged_shards_equal_the_unsharded_results(
    scenarios: list[Scenario], tmp_path: Path
) -> None:
    by_id = {s.id: _result(s, k) for k, s in enumerate(scenarios)}
    unsharded = RunResults(
        _metadata(None, "2024-05-01T10:00:00+00:00", 60.0, scenarios),
        tuple(by_id[s.id] for s in scenarios),
    )
    parts = []
    for i in range(1, 5):
        mine = select_shard(scenarios, i, 4)
        shard = RunResults(
            _metadata(f"{i}/4", f"2024-05-01T10:00:0{i}+00:00", 10.0 + i, scenarios),
            tuple(by_id[s.id] for s in mine),
        )
        path = tmp_path / f"shard-{i}" / "results.json"
        write(shard, path)  # through the file format, as the workflow's artifacts do
        parts.append((str(path), load_results(path)))
    random.Random(3).shuffle(parts)  # artifacts download in any order

    merged = merge_results(parts)
    assert merged.scenarios == unsharded.scenarios
    assert merged.metadata.shard is None
    assert merged.metadata.started_at == "2024-05-01T10:00:01+00:00"
    assert merged.metadata.duration_seconds == 14.0  # the slowest shard: they ran in parallel
    for status in STATUSES:
        assert merged.count(status) == unsharded.count(status)  # type: ignore[arg-type]

    out = tmp_path / "merged.json"  # and the same through the real command
    proc = run_lkeval(["merge", *(p for p, _ in parts), "-o", str(out)], clean_env(), timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert load_results(out).scenarios == unsharded.scenarios


def test_merging_overlapping_shards_is_a_clear_error(
    scenarios: list[Scenario], tmp_path: Path
) -> None:
    by_id = {s.id: _result(s, k) for k, s in enumerate(scenarios)}
    # shards of a 2-way and a 3-way split overlap: someone mixed matrix sizes
    a = RunResults(
        _metadata("1/2", "2024-05-01T10:00:00+00:00", 1.0, scenarios),
        tuple(by_id[s.id] for s in select_shard(scenarios, 1, 2)),
    )
    b = RunResults(
        _metadata("1/3", "2024-05-01T10:00:00+00:00", 1.0, scenarios),
        tuple(by_id[s.id] for s in select_shard(scenarios, 1, 3)),
    )
    with pytest.raises(UsageError, match=r"is in both a\.json and b\.json.*--shard N"):
        merge_results([("a.json", a), ("b.json", b)])
    # the same shard downloaded twice is an overlap too
    with pytest.raises(UsageError, match="is in both"):
        merge_results([("a.json", a), ("a-again.json", dataclasses.replace(a))])

    write(a, tmp_path / "a.json")
    write(b, tmp_path / "b.json")
    proc = run_lkeval(
        [
            "merge",
            str(tmp_path / "a.json"),
            str(tmp_path / "b.json"),
            "-o",
            str(tmp_path / "merged.json"),
        ],
        clean_env(),
        timeout=60,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "is in both" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "merged.json").exists()


def test_shards_of_different_splits_or_a_missing_one_are_named(
    scenarios: list[Scenario],
) -> None:
    by_id = {s.id: _result(s, k) for k, s in enumerate(scenarios)}

    def shard(i: int, n: int) -> RunResults:
        mine = select_shard(scenarios, i, n)
        return RunResults(
            _metadata(f"{i}/{n}", "2024-05-01T10:00:00+00:00", 1.0, scenarios),
            tuple(by_id[s.id] for s in mine),
        )

    assert missing_shards([("a", shard(1, 3)), ("c", shard(3, 3))]) == ["2/3"]
    with pytest.raises(UsageError, match=r"shard\(s\) 2/3 missing.*--allow-partial"):
        merge_results([("a", shard(1, 3)), ("c", shard(3, 3))])
    partial = merge_results([("a", shard(1, 3)), ("c", shard(3, 3))], allow_partial=True)
    assert partial.metadata.missing_shards == ("2/3",)
    with pytest.raises(UsageError, match="shards of different splits"):
        missing_shards([("a", shard(1, 2)), ("b", shard(2, 3))])
