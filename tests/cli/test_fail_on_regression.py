"""``lkeval report --baseline FILE --fail-on regression`` end to end (files in, exit code, gate
line and Markdown out): a failure main never showed blocks the merge, whether the scenario is
new, had no verdict in the baseline, or the baseline shares no scenario with the run; a failure
the baseline had too does not."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_fixtures import main_results, results_of, scenario, write_results

from lkeval.cli import main
from lkeval.errors import ExitCode
from lkeval.results.model import NOT_RUN_NO_LLM, RunResults

MAIN = main_results(
    scenario("greets"),
    scenario("books a room", "failed"),
    scenario("cancels", "skipped", reason=NOT_RUN_NO_LLM, attempts=()),
)


def report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], now: RunResults, baseline: RunResults
) -> tuple[int, str, str]:
    """Exit code, the gate line (the last line of stdout) and the Markdown report."""
    results, base, markdown = tmp_path / "results.json", tmp_path / "base.json", tmp_path / "r.md"
    write_results(now, results)
    write_results(baseline, base)
    capsys.readouterr()
    argv = ["report", "--results", str(results), "--baseline", str(base), "--fail-on"]
    code = main([*argv, "regression", "--no-github", "--markdown", str(markdown)])
    out = capsys.readouterr().out
    return code, out.splitlines()[-1], markdown.read_text(encoding="utf-8")


def test_a_new_failing_scenario_and_one_not_run_on_main_fail_the_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = results_of(
        scenario("greets"),
        scenario("books a room", "failed"),
        scenario("cancels", "failed"),
        scenario("hands off", "error"),
    )
    code, line, markdown = report(tmp_path, capsys, now, MAIN)
    assert code == ExitCode.GATE_FAILED, line
    assert line == (
        "lk-eval gate: FAILED (exit 1) — 1 new scenario failed or errored: hands off; "
        "1 scenario failed or errored with no verdict in the baseline: cancels (skipped there); "
        "1 scenario failed or errored as in the baseline, or within main's noise "
        "(not blocking): books a room"
    )
    assert markdown.startswith(
        "## lk-eval: ❌ gate failed — 1 new scenario failed or errored, "
        "1 scenario failed or errored with no verdict in the baseline\n"
    )
    assert "### ❌ New failures (2)" in markdown and "### ❌ Still failing (1)" in markdown
    assert "🆕 no verdict in the baseline (skipped there)" in markdown


def test_failures_main_had_too_pass_the_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = results_of(scenario("greets"), scenario("books a room", "failed"), scenario("cancels"))
    code, line, _ = report(tmp_path, capsys, now, MAIN)
    assert code == ExitCode.PASSED, line
    assert "(not blocking): books a room" in line


def test_a_baseline_sharing_no_scenario_with_the_run_blocks_every_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = results_of(scenario("renamed greeting"), scenario("renamed booking", "failed"))
    code, line, markdown = report(tmp_path, capsys, now, MAIN)
    assert code == ExitCode.GATE_FAILED, line
    assert line == (
        "lk-eval gate: FAILED (exit 1) — 1 new scenario failed or errored: renamed booking"
    )
    assert "0 regressed, 0 fixed, 2 new, 3 removed vs baseline" in markdown
