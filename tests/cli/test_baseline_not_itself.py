"""A baseline cannot be the run it gates (issue 33.5), through the real ``lkeval report``.

Compared with itself a run has no regression: under ``--fail-on regression`` every failure is
"as in the baseline" and the gate passed. The results file itself, a copy of it, and a later
file whose history already counts the run are each refused with exit 2.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from report_fixtures import metadata, results_of, scenario, write_results

from lkeval.cli import main
from lkeval.errors import ExitCode
from lkeval.results.history import with_history
from lkeval.results.model import RunResults

NOW = results_of(scenario("greets"), scenario("books a room", "failed"))


def report(capsys: pytest.CaptureFixture[str], results: Path, baseline: Path) -> tuple[int, str]:
    capsys.readouterr()
    argv = ["report", "--results", str(results), "--baseline", str(baseline)]
    code = main([*argv, "--fail-on", "regression", "--no-github"])
    captured = capsys.readouterr()
    return code, captured.err + captured.out


def test_the_gated_results_file_as_its_own_baseline_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "results.json"
    write_results(NOW, path)
    code, out = report(capsys, path, path)
    assert code == ExitCode.USAGE, out
    assert out.startswith(f"lk-eval: baseline: {path} is the results file it gates ({path})")


def test_a_copy_of_the_gated_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, copy = tmp_path / "results.json", tmp_path / "main.json"
    write_results(NOW, path)
    shutil.copy(path, copy)
    code, out = report(capsys, path, copy)
    assert code == ExitCode.USAGE, out
    assert out.startswith(
        f"lk-eval: baseline: {copy}: the baseline records the run it gates (started "
        "2025-01-02T03:04:05Z, commit 0123456789abcdef0123456789abcdef01234567)"
    )


def test_a_baseline_whose_history_counts_the_gated_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    later_meta = metadata(started_at="2025-01-03T00:00:00Z", git_sha="f" * 40)
    later = with_history(RunResults(later_meta, NOW.scenarios), NOW, 20)
    path, base = tmp_path / "results.json", tmp_path / "later.json"
    write_results(NOW, path)
    write_results(later, base)
    code, out = report(capsys, path, base)
    assert code == ExitCode.USAGE, out
    assert "the baseline's history already counts the run it gates" in out


def test_another_run_of_main_is_a_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main_run = dataclasses.replace(
        NOW, metadata=metadata(started_at="2025-01-01T00:00:00Z", git_sha="e" * 40)
    )
    path, base = tmp_path / "results.json", tmp_path / "main.json"
    write_results(NOW, path)
    write_results(main_run, base)
    code, out = report(capsys, path, base)
    assert code == ExitCode.PASSED, out
    assert "failed or errored as in the baseline" in out.splitlines()[-1]
