"""Every decision states its own confidence, and the gate its sensitivity (issue 33.7), through
the real ``lkeval report``."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_fixtures import metadata, write_results

from lkeval.cli import main
from lkeval.errors import ExitCode
from lkeval.results.model import (
    Attempt,
    History,
    HistoryRun,
    RunCount,
    RunResults,
    ScenarioHistory,
    ScenarioResult,
    SuiteFingerprint,
    Verdict,
)
from lkeval.results.sampling import SequentialRule, describe, observe, operating


def sequential(label: str, votes: str) -> ScenarioResult:
    """A scenario the sequential test decided on one judge vote per attempt ("p"/"f")."""
    attempts = tuple(
        Attempt(
            "passed" if v == "p" else "failed",
            verdicts=(Verdict("judge", "pass" if v == "p" else "fail"),),
        )
        for v in votes
    )
    sampling = describe(SequentialRule(), [o for a in attempts if (o := observe(a)) is not None])
    status = "passed" if sampling.outcome == "passed" else "failed"
    return ScenarioResult(
        f"SCN_{label}", label, "G", "Group", "s.yaml", 1, status, attempts=attempts,  # type: ignore[arg-type]
        sampling=sampling,
    )  # fmt: skip


def report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], results: RunResults, *flags: str
) -> tuple[int, list[str]]:
    path = tmp_path / "results.json"
    write_results(results, path)
    capsys.readouterr()
    code = main(["report", "--results", str(path), "--no-github", *flags])
    return code, capsys.readouterr().out.splitlines()


def test_the_headline_states_what_the_gate_lets_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: only the false-block rate; a 30%-broken scenario passing 90% of the time was
    not said anywhere."""
    results = RunResults(
        metadata(sampling_rule={"max_attempts": 20}),
        (sequential("greets", "ppp"), sequential("books", "pf" * 9 + "pp")),
    )
    code, lines = report(tmp_path, capsys, results)
    assert code == ExitCode.PASSED, lines
    rule = SequentialRule()
    assert 1 - operating(rule, 0.70).p_fail == pytest.approx(0.8958, abs=1e-4)  # exact
    (headline,) = [line for line in lines if line.startswith("sensitivity: ")]
    assert headline == (
        "sensitivity: a scenario broken in 30% / 50% / 70% / 90% of its conversations passes "
        "90% / 44% / 9% / 0.84% (sequential test) of the time (exact; see docs/sampling.md)"
    )
    (cost,) = [line for line in lines if line.startswith("sampling: ")]
    assert "falsely blocked in" in cost
    assert lines.index(headline) == lines.index(cost) + 1 and lines[-1].startswith("lk-eval gate")


def main_with_history(passes: int, attempts: int) -> RunResults:
    """main's last run of both scenarios, carrying a history of "books": ``passes`` of
    ``attempts`` over five runs (the same content digests as the run gated below)."""
    runs = tuple(HistoryRun(f"2025-01-0{d}T00:00:00Z", "e" * 40) for d in range(1, 6))
    per_run = attempts // len(runs)
    counts = tuple(RunCount(r.started_at, passes // len(runs), per_run, "passed") for r in runs)
    history = History(20, runs, {"SCN_books": ScenarioHistory("d-books", counts)})
    meta = metadata(started_at="2025-01-06T00:00:00Z", git_sha="f" * 40, suite=SUITE)
    scenarios = (sequential("greets", "ppp"), sequential("books", "ppp"))
    return RunResults(meta, scenarios, history=history)


EXAMPLE = Path(__file__).parents[2] / "examples" / "hotel" / "scenarios.yaml"
SUITE = SuiteFingerprint({"SCN_greets": "d-greets", "SCN_books": "d-books"})


def test_a_pass_significantly_below_main_is_a_regression_under_fail_on_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """11 of 20 at the cap passes the sequential test; against 95% on main (and 3 of 3 in
    main's last run) it is significantly lower: blocked under regression, a warning under any,
    from the attempts already run."""
    base = tmp_path / "main.json"
    write_results(main_with_history(95, 100), base)
    now = RunResults(
        metadata(suite=SUITE, sampling_rule={"max_attempts": 20}),
        (sequential("greets", "ppp"), sequential("books", "pf" * 9 + "pp")),
    )
    assert [s.status for s in now.scenarios] == ["passed", "passed"]
    junit = tmp_path / "junit.xml"
    flags = ("--baseline", str(base), "--fail-on", "regression", "--junit", str(junit))
    code, lines = report(tmp_path, capsys, now, *flags)
    assert code == ExitCode.GATE_FAILED, lines
    assert (
        '<property name="history_test" value="passed the sequential test with 11 of 20 now vs '
        "95% on main (98 of 103 attempts over 6 runs, stable): p = 1.61e-05"
    ) in junit.read_text(encoding="utf-8")
    assert lines[-1] == (
        "lk-eval gate: FAILED (exit 1) — 1 scenario passed the sequential test but "
        "significantly less often than on main: books"
    )
    code, lines = report(tmp_path, capsys, now, "--baseline", str(base), "--fail-on", "any")
    assert code == ExitCode.PASSED, lines
    assert (
        "warning: 1 scenario passed the sequential test but significantly less often than on "
        "main: books (blocks under --fail-on regression)" in lines[-1]
    )


def test_a_pass_within_mains_rate_is_not_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "main.json"
    write_results(main_with_history(95, 100), base)
    now = RunResults(
        metadata(suite=SUITE, sampling_rule={"max_attempts": 20}),
        (sequential("greets", "ppp"), sequential("books", "fppppp")),
    )
    code, lines = report(tmp_path, capsys, now, "--baseline", str(base), "--fail-on", "regression")
    assert code == ExitCode.PASSED, lines
    assert "significantly" not in lines[-1]


def test_validate_prints_the_exact_plan_of_a_sensitivity_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--catch 50%:90%``: a 50%-broken scenario caught at least 90% of the time; validate
    prints what that setting catches and costs per scenario before anything runs."""
    scenarios = EXAMPLE
    capsys.readouterr()
    code = main(["validate", str(scenarios), "--catch", "50%:90%", "--max-attempts", "40"])
    out = capsys.readouterr().out.splitlines()
    assert code == ExitCode.PASSED, out
    rule = SequentialRule(broken=0.5, beta=0.1, max_attempts=40)
    half = operating(rule, 0.5)
    assert 1 - half.p_fail < 0.10  # the setting holds, exactly
    start = out.index(
        "sequential test: catch 50%-broken at 90%, at most 40 attempts, judge flipping 10% (exact):"
    )
    assert out[start + 4] == (
        f"  50% | 7% | {half.expected_attempts:.2f} | {half.expected_votes:.2f}"
    )
    fine = operating(rule, 0.95)
    assert out[start + 2] == (
        f"  5% (fine) | 99.945% | {fine.expected_attempts:.2f} | {fine.expected_votes:.2f}"
    )
    assert out[start + 7].startswith("  a suite of these 4 fine scenario(s) is falsely blocked")


@pytest.mark.parametrize("value", ["50%", "2%:90%", "50%:30%", "x:y"])
def test_a_sensitivity_that_cannot_be_meant_is_exit_2(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["report", "--results", "r.json", "--catch", value])
    assert raised.value.code == ExitCode.USAGE
    assert "--catch: " in capsys.readouterr().err


def test_report_gates_with_the_sensitivity_it_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """11 of 20 at the cap passes the default test; at --catch 50%:90% its attempts are a
    failure, and the report says so (the file cannot loosen the rule: the flag sets it)."""
    results = RunResults(
        metadata(sampling_rule={"max_attempts": 20}),
        (sequential("greets", "pppppp"), sequential("books", "pf" * 9 + "pp")),
    )
    code, lines = report(tmp_path, capsys, results)
    assert code == ExitCode.PASSED, lines
    code, lines = report(tmp_path, capsys, results, "--catch", "50%:90%")
    assert code == ExitCode.GATE_FAILED, lines
    assert "1 scenario failed or errored: books" in lines[-1]
    (headline,) = [line for line in lines if line.startswith("sensitivity: ")]
    assert "passes 40% / 7% / 0.81% / 0.030% (sequential test)" in headline  # cap 20


def test_run_decides_and_records_with_the_sensitivity_it_is_given() -> None:
    """``lkeval run --catch 50%:90% --max-attempts 40``: the engine's rule, and the options its
    results' fingerprint records (``lkeval merge`` refuses shards run with another)."""
    from lkeval.cli import build_parser
    from lkeval.cli.options import run_options
    from lkeval.cli.run import suite_settings

    argv = ["run", "--agent", "agent.py", "--scenarios", "s.yaml", "--catch", "50%:90%"]
    options = run_options(build_parser().parse_args([*argv, "--max-attempts", "40"]), environ={})
    settings = suite_settings(options)
    assert settings.engine.sampling == SequentialRule(broken=0.5, beta=0.1, max_attempts=40)
    assert ("--catch", (0.5, 0.9)) in settings.verdict_options
    default = run_options(build_parser().parse_args(argv[:-2]), environ={})
    assert suite_settings(default).engine.sampling == SequentialRule()
