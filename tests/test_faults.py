"""The fault matrix: hostile input and broken machines each get a clear answer, never exit 4.

Each test is one fault from a review round (issue 19, 20): it would fail if the fault came
back. Faults about secrets live in test_canary.py, about processes in test_orphans.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_fixtures import run_results

from lkeval.cli import main
from lkeval.errors import ExitCode
from lkeval.results.model import MAX_RESULTS_DEPTH, dump_results


def _nested_results(tmp_path: Path, name: str, depth: int) -> Path:
    """A valid results file with ``depth`` nested lists under one metadata value."""
    raw = json.loads(dump_results(run_results()))
    text = json.dumps(raw)
    value = "[" * depth + "]" * depth
    text = text.replace('"git_branch": "feature/booking"', f'"git_branch": {value}', 1)
    assert value in text
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("depth", [MAX_RESULTS_DEPTH, 100_000])
@pytest.mark.parametrize("reader", ["report", "baseline", "merge"])
def test_a_deeply_nested_results_file_is_exit_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reader: str, depth: int
) -> None:
    """A fork's artifact nested 100,000 deep once crashed ``lkeval report`` (RecursionError,
    exit 4); every reader of a results file (report, --baseline, merge) refuses it by name."""
    good = tmp_path / "good.json"
    good.write_text(dump_results(run_results()), encoding="utf-8")
    deep = _nested_results(tmp_path, "deep.json", depth)
    argv = {
        "report": ["report", "--results", str(deep)],
        "baseline": ["report", "--results", str(good), "--baseline", str(deep)],
        "merge": ["merge", str(good), str(deep), "-o", str(tmp_path / "merged.json")],
    }[reader]
    assert main(argv) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert str(deep) in err and f"nested more than {MAX_RESULTS_DEPTH} levels" in err
    assert "Traceback" not in err and "internal error" not in err


def test_a_results_file_nested_within_the_limit_is_read(tmp_path: Path) -> None:
    """The bound refuses only what lk-eval never writes: just under it reads (exit 0 or 1)."""
    path = _nested_results(tmp_path, "ok.json", MAX_RESULTS_DEPTH - 5)
    assert main(["report", "--results", str(path)]) in (ExitCode.PASSED, ExitCode.GATE_FAILED)
