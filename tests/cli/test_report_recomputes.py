"""``lkeval report`` believes nothing it can recompute (issue 33.4), through the real command.

Each file below is one field edited in a run's results (an attempt's status, a judge verdict
against its own votes, the ``quarantined`` flag, a "not selected" skip): the old command gated
each of them as a pass; now each is exit 2 naming the scenario, the attempt and the field.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from report_fixtures import metadata, scenario, verdicts_for, write_results

from lkeval.cli import main
from lkeval.errors import ExitCode
from lkeval.results.model import Attempt, RunResults, ScenarioResult, SuiteFingerprint, Verdict
from lkeval.results.sampling import SequentialRule, describe, observe

NO_OPTIONS = {"--quarantine": "(none)", "--tag": "(none)", "--match": "(none)"}


def judged(*votes: tuple[str, ...]) -> tuple[Attempt, ...]:
    """Attempts decided by the judge alone, with these votes each (the majority stands)."""
    out = []
    for vote in votes:
        passed = sum(1 for v in vote if v == "pass")
        verdict = "pass" if passed > len(vote) - passed else "fail"
        status = "passed" if verdict == "pass" else "failed"
        out.append(Attempt(status, verdicts=(Verdict("judge", verdict, votes=vote),)))  # type: ignore[arg-type]
    return tuple(out)


def sequential(label: str, attempts: tuple[Attempt, ...]) -> ScenarioResult:
    """A sequential scenario whose recorded decision is what its attempts give (as recorded)."""
    seen = [o for a in attempts if (o := observe(a)) is not None]
    sampling = describe(SequentialRule(), seen)
    status = "passed" if sampling.outcome == "passed" else "failed"
    return scenario(label, status, attempts=attempts, sampling=sampling)


def run_of(*scenarios: ScenarioResult, **options: str) -> RunResults:
    suite = SuiteFingerprint(
        {s.scenario_id: f"d-{s.scenario_id}" for s in scenarios}, {**NO_OPTIONS, **options}
    )
    return RunResults(metadata(suite=suite), scenarios)


def report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], results: RunResults
) -> tuple[int, str]:
    """The exit code and stderr of ``lkeval report`` on ``results``."""
    path = tmp_path / "results.json"
    write_results(results, path)
    capsys.readouterr()
    code = main(["report", "--results", str(path), "--no-github"])
    return code, capsys.readouterr().err


def test_a_judge_verdict_its_own_votes_contradict_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A verdict edited to "pass" over votes fail, fail, pass read as a definite pass (the
    old code took the mismatch for a veto) and passed the scenario: now exit 2."""
    honest = judged(("pass",), ("pass",), ("fail", "fail", "pass"))
    forged = (
        *honest[:2],
        Attempt("passed", verdicts=(Verdict("judge", "pass", votes=("fail", "fail", "pass")),)),
    )
    results = run_of(sequential("books", forged))
    assert results.scenarios[0].status == "passed"  # what the forger recorded
    code, err = report(tmp_path, capsys, results)
    assert code == ExitCode.USAGE, err
    assert err.startswith(
        "lk-eval: " + str(tmp_path / "results.json") + ": scenario books, attempt 3: "
        "verdicts[1].verdict is 'pass', but its votes fail, fail, pass give 'fail': "
        "the file contradicts itself; refusing to gate this file"
    )


def test_a_failed_attempt_edited_to_skipped_cannot_leave_the_sequential_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pass, pass, fail, pass is undecided; with the fail marked skipped the test read pass,
    pass, pass and passed the scenario."""
    attempts = judged(("pass",), ("pass",), ("fail",), ("pass",))
    hidden = (*attempts[:2], dataclasses.replace(attempts[2], status="skipped"), attempts[3])
    results = run_of(sequential("books", hidden))
    assert results.scenarios[0].status == "passed"
    code, err = report(tmp_path, capsys, results)
    assert code == ExitCode.USAGE, err
    assert (
        ": scenario books, attempt 3: status is skipped, but it ran (it has a transcript, " in err
    )


@pytest.mark.parametrize(
    ("status", "verdicts", "field"),
    [
        ("passed", (Verdict("judge", "fail"),), "status is passed, but its judge verdict is fail"),
        (
            "passed",
            (Verdict("judge", "pass"), Verdict("agent", "fail")),
            "status is passed, but its agent verdict is fail",
        ),
        (
            "passed",
            (Verdict("judge", "maybe"),),
            "status is passed, but its judge verdict is maybe",
        ),
        ("passed", (), "status is passed, but it has no verdict (nothing decided it)"),
        ("failed", (Verdict("judge", "pass"),), "status is failed, but no verdict or check of it"),
    ],
)
def test_an_attempt_status_its_verdicts_do_not_give_is_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    status: str,
    verdicts: tuple[Verdict, ...],
    field: str,
) -> None:
    edited = Attempt(status, verdicts=verdicts)  # type: ignore[arg-type]
    results = run_of(scenario("greets"), scenario("books", status, attempts=(edited,)))
    code, err = report(tmp_path, capsys, results)
    assert code == ExitCode.USAGE, err
    assert ": scenario books, attempt 1: " + field in err


def test_a_maybe_passes_only_under_the_recorded_maybe_is_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    maybe = Attempt("passed", verdicts=(Verdict("judge", "maybe"),))
    results = run_of(scenario("books", attempts=(maybe,)), **{"--maybe-is-pass": "true"})
    code, err = report(tmp_path, capsys, results)
    assert code == ExitCode.PASSED, err


def test_a_quarantine_the_recorded_options_do_not_give_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failure marked quarantined in the file alone no longer stops blocking."""
    failing = scenario("books", "failed", quarantined=True, tags={"team": "rooms"})
    results = run_of(scenario("greets"), failing)
    code, err = report(tmp_path, capsys, results)
    assert code == ExitCode.USAGE, err
    assert (
        ": scenario books: quarantined is true, but the run's --quarantine (none) and its tags "
        "give false: the file contradicts itself" in err
    )
    # The run's own quarantine stands: reported, not blocking.
    results = run_of(scenario("greets"), failing, **{"--quarantine": '[["team", "rooms"]]'})
    code, err = report(tmp_path, capsys, results)
    assert code == ExitCode.PASSED, err


def test_a_failure_edited_into_a_not_selected_skip_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = scenario("books", "skipped", reason="not selected (tag team=desk)", attempts=())
    code, err = report(tmp_path, capsys, run_of(scenario("greets"), gone))
    assert code == ExitCode.USAGE, err
    assert (
        ": scenario books: reason says not selected, but the run's --tag/--match select it" in err
    )
    # Really not selected by the recorded --tag: fine.
    selected = dataclasses.replace(scenario("greets"), tags={"team": "desk"})
    results = run_of(selected, gone, **{"--tag": '[["team", "desk"]]'})
    code, err = report(tmp_path, capsys, results)
    assert code == ExitCode.PASSED, err


def test_a_scenario_that_ran_outside_the_recorded_selection_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = run_of(scenario("greets"), scenario("books"), **{"--match": '["greet*"]'})
    code, err = report(tmp_path, capsys, results)
    assert code == ExitCode.USAGE, err
    assert ": scenario books: it ran, but the run's --tag/--match do not select it" in err


def test_verdicts_for_gives_consistent_attempts() -> None:
    """The fixtures' attempts are what the engine writes (the other tests depend on it)."""
    for status in ("passed", "failed"):
        attempt = Attempt(status, verdicts=verdicts_for(status))  # type: ignore[arg-type]
        results = run_of(scenario("books", status, attempts=(attempt,)))
        from lkeval.results.consistency import status_problem

        assert status_problem(results) == ""
