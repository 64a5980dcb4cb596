"""A results file's history is cut to what a reader can use while it is read (issue 30.3).

A fork's artifact (the comment job's ``lkeval report``) or a baseline can carry a history of
200,000 runs or 28,000 scenarios no suite has; reading it once built every entry into the model
(16 s and 35 s on 2 busy cores). Only the last ``MAX_WINDOW`` runs and the suite's own
scenarios are built now; the rest is never walked. ``bench/hostile_history.py`` prints the
time to read such files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from report_fixtures import metadata, scenario

from lkeval.cli import main
from lkeval.errors import ExitCode
from lkeval.results.baseline import compare
from lkeval.results.history import MAX_WINDOW
from lkeval.results.model import RunCount, RunResults, SuiteFingerprint
from lkeval.results.results_json import MAX_RESULTS_DEPTH, dump_results, load_results

SID = "SCN_book"


def _run_id(i: int) -> str:
    return f"2025-01-01T00:00:00.{i:06d}Z"


def _count(run: str, passes: int = 1, attempts: int = 1) -> dict[str, Any]:
    return {"run": run, "passes": passes, "attempts": attempts, "status": "passed"}


def _results_file(
    tmp_path: Path, runs: int, scenarios: dict[str, dict[str, Any]], status: str = "failed"
) -> Path:
    """A results file of one scenario (``SID``, digest ``d1``) carrying a hand-made history."""
    results = RunResults(
        metadata(started_at="2026-01-01T00:00:00Z", suite=SuiteFingerprint({SID: "d1"})),
        (scenario("book", status),),
    )
    raw = json.loads(dump_results(results))
    raw["history"] = {
        "window": 20,
        "runs": [{"started_at": _run_id(i), "git_sha": None} for i in range(runs)],
        "scenarios": scenarios,
    }
    path = tmp_path / "results.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def test_runs_beyond_the_window_are_never_built(tmp_path: Path) -> None:
    runs = 5 * MAX_WINDOW
    counts = [_count(_run_id(i)) for i in range(runs)]
    path = _results_file(tmp_path, runs, {SID: {"digest": "d1", "counts": counts}})
    history = load_results(path).history
    assert history is not None
    assert [r.started_at for r in history.runs] == [_run_id(i) for i in range(runs)][-MAX_WINDOW:]
    kept = history.scenarios[SID].counts
    assert [c.run for c in kept] == [r.started_at for r in history.runs]


def test_scenarios_not_in_the_suite_or_edited_since_are_never_built(tmp_path: Path) -> None:
    counts = [_count(_run_id(i)) for i in range(20)]
    unknown = {f"SCN_unknown_{i}": {"digest": "d9", "counts": counts} for i in range(2000)}
    edited = {"digest": "d0", "counts": counts}  # the suite's scenario, another content
    path = _results_file(tmp_path, 20, {**unknown, SID: edited})
    history = load_results(path).history
    assert history is not None and history.scenarios == {}


def test_what_is_dropped_is_never_walked(tmp_path: Path) -> None:
    """A dropped scenario nested past the depth bound is not looked at (it once was, whole)."""
    deep = "[" * (MAX_RESULTS_DEPTH + 50) + "]" * (MAX_RESULTS_DEPTH + 50)
    path = _results_file(tmp_path, 3, {"SCN_unknown": {"digest": "d9", "counts": []}})
    text = path.read_text(encoding="utf-8").replace('"counts": []', f'"counts": {deep}')
    path.write_text(text, encoding="utf-8")
    assert load_results(path).history is not None


def test_a_run_counted_twice_counts_once(tmp_path: Path) -> None:
    """A forged history repeating one run's count (20 passes of 20, 50 times over) cannot make
    a scenario look surer than the runs it names."""
    counts = [_count(_run_id(0), 20, 20) for _ in range(50)] + [_count(_run_id(1), 0, 1)]
    path = _results_file(tmp_path, 2, {SID: {"digest": "d1", "counts": counts}})
    history = load_results(path).history
    assert history is not None
    assert history.scenarios[SID].counts == (
        RunCount(_run_id(0), 20, 20, "passed"),
        RunCount(_run_id(1), 0, 1, "passed"),
    )


def _gated_by(baseline: Path) -> Path:
    """A later run of the same suite, gated against ``baseline`` (a baseline cannot be the
    run it gates: another start time and commit, no history of its own)."""
    raw = json.loads(baseline.read_text(encoding="utf-8"))
    raw["metadata"]["started_at"] = "2099-01-01T00:00:00Z"
    raw["metadata"]["git_sha"] = "f" * 40
    raw.pop("history", None)
    gated = baseline.with_name("gated.json")
    gated.write_text(json.dumps(raw), encoding="utf-8")
    return gated


def test_a_bounded_history_gives_the_verdict_the_window_gives(tmp_path: Path) -> None:
    """Cutting while reading changes nothing a reader sees: the comparison against a 2,000-run
    history is the one against its last window."""
    runs = 2000
    counts = [_count(_run_id(i), 1 if i % 10 else 0, 1) for i in range(runs)]
    path = _results_file(tmp_path, runs, {SID: {"digest": "d1", "counts": counts}})
    baseline = load_results(path)
    change = compare(baseline, baseline).change_for(SID)
    assert change is not None and change.history is not None
    assert change.history.attempts == 20  # the default window of the last runs, plus its own
    gated = str(_gated_by(path))
    code = main(["report", "--results", gated, "--baseline", str(path), "--no-github"])
    assert code in (ExitCode.PASSED, ExitCode.GATE_FAILED)


def test_a_malformed_run_or_count_is_dropped_not_a_crash(tmp_path: Path) -> None:
    """A baseline whose history holds a start time that is a list, or passes that are text,
    once ended ``lkeval report`` with exit 4 (the readers hash and sum them)."""
    good = [_count(_run_id(0), 3, 4)]
    bad = [
        {"run": _run_id(1), "passes": "3", "attempts": 4},
        {"run": _run_id(1), "passes": 5, "attempts": 4},
        {"run": _run_id(1), "passes": True, "attempts": 1},
        "not a count",
    ]
    path = _results_file(tmp_path, 2, {SID: {"digest": "d1", "counts": good + bad}})
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw["history"]["runs"].append({"started_at": ["a list"], "git_sha": None})
    path.write_text(json.dumps(raw), encoding="utf-8")
    history = load_results(path).history
    assert history is not None
    assert [r.started_at for r in history.runs] == [_run_id(0), _run_id(1)]
    assert history.scenarios[SID].counts == (RunCount(_run_id(0), 3, 4, "passed"),)
    gated = str(_gated_by(path))
    code = main(["report", "--results", gated, "--baseline", str(path), "--no-github"])
    assert code in (ExitCode.PASSED, ExitCode.GATE_FAILED)
