"""What a hostile results file costs to read: a history of 200,000 runs or 28,000 unknown
scenarios, and 1.99 million empty lists (just under the bound on arrays and objects).

The comment job reads a fork's artifact (``lkeval report``), and every run reads its baseline;
either can carry a ``history`` far past anything lk-eval writes. Prints the time to read each
file (``load_results``: the JSON parse, then the history cut to the last ``MAX_WINDOW`` runs
and the suite's own scenarios) and to compare it with itself. No assertions.

    .venv/bin/python bench/hostile_history.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from report_fixtures import metadata, scenario

from lkeval.results.baseline import compare
from lkeval.results.model import RunResults, SuiteFingerprint
from lkeval.results.results_json import load_results, results_document


def _document(history: dict[str, Any]) -> dict[str, Any]:
    scenarios = [scenario(f"s{i}") for i in range(20)]
    suite = SuiteFingerprint({s.scenario_id: "d1" for s in scenarios})
    results = RunResults(metadata(started_at="2026-11-01T00:00:00Z", suite=suite), tuple(scenarios))
    return {**results_document(results), "history": history}


def _count(run: str) -> dict[str, Any]:
    return {"run": run, "passes": 1, "attempts": 1, "status": "passed"}


def many_runs(n: int = 200_000) -> dict[str, Any]:
    """``n`` runs; each of the suite's 20 scenarios counted in the last 10,000."""
    runs = [{"started_at": f"2026-01-01T00:00:00.{i:06d}Z", "git_sha": "a" * 40} for i in range(n)]
    counts = [_count(r["started_at"]) for r in runs[-10_000:]]
    scenarios = {f"SCN_s{i}": {"digest": "d1", "counts": counts} for i in range(20)}
    return _document({"window": 20, "runs": runs, "scenarios": scenarios})


def unknown_scenarios(n: int = 28_000) -> dict[str, Any]:
    """``n`` scenarios no suite has, 20 runs of counts each."""
    runs = [{"started_at": f"r{i}", "git_sha": None} for i in range(20)]
    counts = [_count(r["started_at"]) for r in runs]
    scenarios = {f"SCN_unknown_{i}": {"digest": "d9", "counts": counts} for i in range(n)}
    return _document({"window": 20, "runs": runs, "scenarios": scenarios})


def empty_lists(n: int = 1_990_000) -> dict[str, Any]:
    """``n`` empty lists in one value, just under the bound on arrays and objects."""
    doc = _document({"window": 20, "runs": [], "scenarios": {}})
    doc["metadata"]["git_branch"] = [[] for _ in range(n)]
    return doc


def main() -> None:
    print(f"load average (1 min) at the start: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        cases = (
            ("200,000 runs", many_runs),
            ("28,000 unknown", unknown_scenarios),
            ("1.99M [] lists", empty_lists),
        )
        for name, build in cases:
            path = Path(tmp) / "results.json"
            path.write_text(json.dumps(build()), encoding="utf-8")
            size = path.stat().st_size / (1024 * 1024)
            best = compared = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                results = load_results(path)
                read = time.perf_counter()
                compare(results, results)
                best = min(best, read - start)
                compared = min(compared, time.perf_counter() - read)
            history = results.history
            kept = (len(history.runs), len(history.scenarios)) if history else (0, 0)
            print(
                f"{name:>15} ({size:.0f} MiB): read {best:.2f} s, compare {compared:.3f} s, "
                f"kept {kept[0]} runs, {kept[1]} scenarios (best of 3)"
            )
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
