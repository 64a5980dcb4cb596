"""The engine's default: the sequential test, with fake attempts and a fake judge (nothing
boots, nothing random): how many attempts run, in which order they count, which verdicts are
asked again, and the caps."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_engine import Quiet, scenario

from lkeval.results.model import Attempt, ScenarioResult, Verdict
from lkeval.results.sampling import SequentialRule
from lkeval.results.wording import outcome_line
from lkeval.run.attempt import Slot
from lkeval.run.engine import AttemptRunner, Engine, EngineOptions, attempts_problem
from lkeval.scenarios.model import Scenario


def judged(vote: str) -> Attempt:
    status = "passed" if vote == "pass" else "failed"
    return Attempt(status=status, verdicts=(Verdict("judge", vote, f"said {vote}"),))  # type: ignore[arg-type]


class Votes:
    """Per scenario id, attempt n's first judge vote (``script[id][n-1]``); ``delay`` makes
    early attempts finish last."""

    def __init__(self, script: dict[str, Sequence[str]], delay: float = 0.0) -> None:
        self.script, self.delay = script, delay
        self.made: list[tuple[str, int]] = []

    def __call__(self, s: Scenario, attempt_no: int) -> AttemptRunner:
        self.made.append((s.id, attempt_no))
        return _Fake(self, s, attempt_no)


class _Fake:
    def __init__(self, votes: Votes, s: Scenario, n: int) -> None:
        self.votes, self.scenario, self.n = votes, s, n
        self.interrupted: Attempt | None = None
        self.agent_cause: str | None = None
        self.on_decided = None

    async def run(self, slot: Slot | None = None) -> Attempt:
        if slot is not None:
            await slot.converse()
        await asyncio.sleep(self.votes.delay / self.n)
        outcome = self.votes.script[self.scenario.id][self.n - 1]
        if outcome in ("pass", "fail"):
            return judged(outcome)
        return Attempt(status=outcome)  # type: ignore[arg-type]


class Judge:
    """``ask_again``: answers with the next vote of ``again[id]`` and records what it was asked."""

    def __init__(self, again: dict[str, list[str]]) -> None:
        self.again = again
        self.asked: list[tuple[str, str]] = []

    async def __call__(self, s: Scenario, attempt: Attempt) -> Attempt:
        from lkeval.run.revote import with_vote

        vote = self.again[s.id].pop(0)
        judge = attempt.verdicts[0]
        self.asked.append((s.id, judge.verdict))
        merged = with_vote(judge, Verdict("judge", vote, f"said {vote}"))  # type: ignore[arg-type]
        status = "passed" if merged.verdict == "pass" else "failed"
        return Attempt(status=status, verdicts=(merged,))


def run(
    scenarios: list[Scenario], make: Votes, judge: Judge | None = None, **options: object
) -> list[ScenarioResult]:
    engine = Engine(make, Quiet(), EngineOptions(**options), ask_again=judge)  # type: ignore[arg-type]
    return asyncio.run(engine.run(scenarios))


def test_a_scenario_that_passes_three_votes_stops_at_three() -> None:
    make = Votes({"s-1": ["pass"] * 20})
    (result,) = run([scenario("s-1")], make, Judge({"s-1": []}))
    assert (result.status, len(result.attempts)) == ("passed", 3)
    assert result.sampling is not None and result.sampling.text.startswith("passed 3 of 3 — ")
    assert make.made == [("s-1", 1), ("s-1", 2), ("s-1", 3)]  # started at once: all were needed


def test_a_broken_scenario_fails_with_its_confidence_and_never_more_than_needed() -> None:
    make = Votes({"s-1": ["fail"] * 20})
    judge = Judge({"s-1": ["fail"] * 40})
    (result,) = run([scenario("s-1")], make, judge)
    assert result.status == "failed"
    assert result.sampling is not None and result.sampling.outcome == "failed"
    assert outcome_line(result).startswith(f"{result.sampling.text}: judge fail: said fail")
    assert "pass rate below 0.86 at 99.9" in result.sampling.text
    assert len(result.attempts) == result.sampling.attempts < 5


def test_a_fail_in_a_fine_looking_scenario_and_a_pass_in_a_broken_one_are_asked_again() -> None:
    # s-1 looks fine (no evidence yet): its fail is questioned, its passes are not.
    # s-2 fails twice, twice confirmed: then its pass is questioned, not its fails.
    make = Votes(
        {
            "s-1": ["fail", "pass", "pass", "pass", "pass"],
            "s-2": ["fail", "fail", "pass", "fail", "fail", "fail"],
        }
    )
    judge = Judge(
        {"s-1": ["pass", "pass"], "s-2": ["fail", "fail", "fail", "fail", "fail", "fail"]}
    )
    first, second = run([scenario("s-1"), scenario("s-2")], make, judge)
    assert first.status == "passed"
    assert [v for sid, v in judge.asked if sid == "s-1"] == ["fail", "fail"]  # F, then the tie
    assert first.attempts[0].status == "passed" and first.attempts[0].verdicts[0].votes == (
        "fail",
        "pass",
        "pass",
    )
    assert second.status == "failed"
    asked_second = [v for sid, v in judge.asked if sid == "s-2"]
    assert "pass" in asked_second  # the pass of a broken-looking scenario was asked again
    assert second.sampling is not None and second.sampling.judge_votes > len(second.attempts)


def test_the_decision_does_not_depend_on_which_attempt_finishes_first() -> None:
    script = {"s-1": ["pass", "fail", "pass", "pass", "pass", "pass", "pass"]}
    slow_first = run([scenario("s-1")], Votes(script, delay=0.05), Judge({"s-1": ["fail"] * 9}))
    in_order = run([scenario("s-1")], Votes(script), Judge({"s-1": ["fail"] * 9}), concurrency=1)
    assert [a.status for a in slow_first[0].attempts] == [a.status for a in in_order[0].attempts]
    assert slow_first[0].sampling == in_order[0].sampling


def test_an_undecided_scenario_at_the_run_cap_is_an_error_never_a_pass() -> None:
    make = Votes({"s-1": ["pass"] * 9, "s-2": ["pass"] * 9})
    first, second = run(
        [scenario("s-1"), scenario("s-2")], make, Judge({}), max_run_attempts=4, concurrency=1
    )
    assert first.status == "passed"
    assert second.status == "error"
    assert (
        "undecided after 1 of 1 passed" in second.reason and "--max-run-attempts" in second.reason
    )


def test_an_error_attempt_counts_against_the_scenario() -> None:
    make = Votes({"s-1": ["error"] * 9})
    (result,) = run([scenario("s-1")], make, Judge({}))
    assert result.status == "error" and len(result.attempts) == 3


def test_the_scenario_cap_ends_the_test() -> None:
    rule = SequentialRule(max_attempts=4, max_votes=1)
    make = Votes({"s-1": ["pass", "fail", "pass", "fail", "pass"]})
    (result,) = run([scenario("s-1")], make, None, sampling=rule)
    assert len(result.attempts) == 4 and result.status == "failed"
    assert result.sampling is not None and "cap of 4" in result.sampling.text


def test_a_fixed_plan_stays_explicit() -> None:
    make = Votes({"s-1": ["pass"] * 2, "s-2": ["pass", "fail"]})
    own = scenario("s-1", repeat=2)
    results = run([own, scenario("s-2")], make, None, repeat=2, min_pass=1)
    assert [(r.status, len(r.attempts)) for r in results] == [("passed", 2), ("passed", 2)]
    assert results[1].sampling is not None and results[1].sampling.mode == "fixed"
    assert results[1].sampling.text == "passed 1 of 2 (--repeat 2 --min-pass 1)"


def test_the_run_cap_is_checked_before_anything_boots() -> None:
    scenarios = [scenario(f"s-{n}") for n in range(1, 5)]
    assert attempts_problem(scenarios, EngineOptions()) is None  # 10 a scenario by default
    problem = attempts_problem(scenarios, EngineOptions(max_run_attempts=11))
    assert problem is not None and "need at least 12 attempts" in problem
    assert attempts_problem(scenarios, EngineOptions(max_run_attempts=4, repeat=1)) is None


class _Crashing(_Fake):
    def __init__(self, votes: Votes, s: Scenario, n: int) -> None:
        super().__init__(votes, s, n)
        if votes.script[s.id][n - 1] == "error":
            self.agent_cause = "agent crashed: KeyError 'room'"


class CrashVotes(Votes):
    def __call__(self, s: Scenario, attempt_no: int) -> AttemptRunner:
        self.made.append((s.id, attempt_no))
        return _Crashing(self, s, attempt_no)


def test_one_broken_scenarios_extra_attempts_do_not_trip_the_error_brake() -> None:
    # The brake is about the first N scenarios failing alike; s-1's three attempts are one.
    make = CrashVotes({"s-1": ["error"] * 9, "s-2": ["pass"] * 9, "s-3": ["pass"] * 9})
    results = run([scenario(f"s-{n}") for n in (1, 2, 3)], make, Judge({}), max_errors=3)
    assert [r.status for r in results] == ["error", "passed", "passed"]
    # three scenarios failing alike still stop the run
    make = CrashVotes({f"s-{n}": ["error"] * 9 for n in range(1, 6)})
    results = run(
        [scenario(f"s-{n}") for n in range(1, 6)], make, Judge({}), max_errors=3, concurrency=1
    )
    assert any("stopped early" in r.reason for r in results[3:])


def test_the_run_cap_flag_is_exit_2_before_anything_boots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lkeval.cli import main
    from lkeval.errors import ExitCode

    monkeypatch.chdir(tmp_path)
    body = "".join(f"  - label: Scenario {i}\n    instructions: Say hi.\n" for i in range(4))
    Path("s.yaml").write_text("scenarios:\n" + body, encoding="utf-8")
    Path("agent.py").write_text("raise SystemExit('never imported')\n", encoding="utf-8")
    argv = ["run", "--agent", "agent.py", "--scenarios", "s.yaml", "--no-github"]
    assert main([*argv, "--max-run-attempts", "11"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "--max-run-attempts 11" in err and "need at least 12 attempts" in err, err
    assert not Path("lkeval-results").exists()
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--max-attempts", "1001"])
    assert exit_.value.code == ExitCode.USAGE


class BootFailures(Votes):
    """Attempts that end at boot with ``reason`` (``"import"``) or as scripted."""

    def __init__(self, script: dict[str, Sequence[str]], reason: str) -> None:
        super().__init__(script)
        self.reason = reason

    def __call__(self, s: Scenario, attempt_no: int) -> AttemptRunner:
        self.made.append((s.id, attempt_no))
        return _Booting(self, s, attempt_no)


class _Booting(_Fake):
    async def run(self, slot: Slot | None = None) -> Attempt:
        votes = self.votes
        assert isinstance(votes, BootFailures)
        if votes.script[self.scenario.id][self.n - 1] != "import":
            return await super().run(slot)
        await asyncio.sleep(0.01 * self.n)  # attempt 1 ends first
        return Attempt(status="error", reason=votes.reason.format(n=self.n))


IMPORT_FAILED = "agent failed to boot: exited with code {n}: ModuleNotFoundError: No module"


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_failure_at_boot_that_recurs_ends_the_scenario_after_one_attempt(
    concurrency: int,
) -> None:
    make = BootFailures({"s-1": ["import"] * 9, "s-2": ["pass"] * 9}, IMPORT_FAILED)
    broken, fine = run([scenario("s-1"), scenario("s-2")], make, None, concurrency=concurrency)
    assert broken.status == "error" and fine.status == "passed"
    # one attempt, not three worded as a sampled pass rate
    assert [a.reason for a in broken.attempts] == [IMPORT_FAILED.format(n=1)]
    assert "ModuleNotFoundError" in broken.reason and "not sampled" in broken.reason
    assert broken.sampling is not None and broken.sampling.attempts == 1
    assert "pass rate" not in broken.sampling.text and "stopped after 1" in broken.sampling.text
    if concurrency == 1:  # the third never started (the second was being prepared: stopped)
        assert 3 not in [n for sid, n in make.made if sid == "s-1"]
    # a fixed plan too
    make = BootFailures({"s-1": ["import"] * 3}, IMPORT_FAILED)
    (fixed,) = run([scenario("s-1")], make, None, concurrency=concurrency, repeat=3)
    assert fixed.status == "error" and len(fixed.attempts) == 1
    assert fixed.sampling is not None and "pass rate" not in fixed.sampling.text


def test_a_failure_that_is_not_at_boot_or_changes_is_still_sampled() -> None:
    # a crash mid-conversation may be load or chance: sampled as before
    make = BootFailures({"s-1": ["import"] * 9}, "agent crashed in turn {n}")
    (result,) = run([scenario("s-1")], make, None)
    assert len(result.attempts) == 3
    # boot failures that differ (beyond numbers) are not "the same cause in every attempt"
    make = BootFailures({"s-1": ["import", "error", "error"]}, IMPORT_FAILED)
    (result,) = run([scenario("s-1")], make, None, concurrency=1)
    assert len(result.attempts) == 3
