"""Every decision states its own confidence, and the gate its sensitivity (issue 33.7), through
the real ``lkeval report``."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_fixtures import metadata, write_results

from lkeval.cli import main
from lkeval.errors import ExitCode
from lkeval.results.model import Attempt, RunResults, ScenarioResult, Verdict
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
