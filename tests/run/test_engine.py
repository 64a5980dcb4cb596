"""The engine alone: repeat/min-pass aggregation, quarantine, selection, the error brake and
ordering under concurrency, with fake attempts from the attempt factory (nothing boots)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from lkeval.publish.github.fork import not_run_results
from lkeval.results.model import Attempt, ScenarioResult, Status
from lkeval.run.attempt import Slot
from lkeval.run.engine import AttemptRunner, Engine, EngineOptions
from lkeval.scenarios.model import Scenario, Selection


def scenario(sid: str, **extra: object) -> Scenario:
    base: dict[str, object] = dict(
        label=f"Label {sid}",
        instructions="You are Ada.",
        agent_expectations="Books it.",
        file="s.yaml",
        line=int(sid.rsplit("-", 1)[-1]) if sid[-1].isdigit() else 1,
        group_id="G",
        group_name="Hotel",
        id=sid,
        id_derived=False,
        tags={},
    )
    base.update(extra)
    return Scenario(**base)  # type: ignore[arg-type]


@dataclass
class Scripted:
    """Attempts that end as scripted: per scenario id, the statuses of attempts 1, 2, ..."""

    outcomes: dict[str, Sequence[Status]]
    delay: dict[str, float] = field(default_factory=dict)
    cause: dict[str, str] = field(default_factory=dict)
    talking: int = 0
    peak: int = 0
    made: list[tuple[str, int]] = field(default_factory=list)

    def __call__(self, s: Scenario, attempt_no: int) -> AttemptRunner:
        self.made.append((s.id, attempt_no))
        return _FakeAttempt(self, s, attempt_no)


class _FakeAttempt:
    def __init__(self, script: Scripted, s: Scenario, attempt_no: int) -> None:
        self.script, self.scenario, self.attempt_no = script, s, attempt_no
        self.interrupted: Attempt | None = None
        self.agent_cause: str | None = script.cause.get(s.id)

    async def run(self, slot: Slot | None = None) -> Attempt:
        if slot is not None:
            await slot.converse()
        self.script.talking += 1
        self.script.peak = max(self.script.peak, self.script.talking)
        try:
            await asyncio.sleep(self.script.delay.get(self.scenario.id, 0.0))
        finally:
            self.script.talking -= 1
        status = self.script.outcomes[self.scenario.id][self.attempt_no - 1]
        reason = "" if status == "passed" else f"{status} #{self.attempt_no}"
        own = self.script.delay.get(self.scenario.id, 0.0)  # its conversation's own time
        return Attempt(status=status, reason=reason, duration_seconds=own)


class Quiet:
    def __init__(self) -> None:
        self.finished: list[str] = []

    def scenario_started(self, scenario_id: str, label: str) -> None:
        pass

    def scenario_finished(self, result: ScenarioResult) -> None:
        self.finished.append(result.scenario_id)


def run(
    scenarios: list[Scenario], script: Scripted, **options: object
) -> tuple[list[ScenarioResult], Quiet]:
    progress = Quiet()
    options.setdefault("repeat", 1)  # one attempt each; the sequential test: test_engine_sampling
    engine = Engine(script, progress, EngineOptions(**options))  # type: ignore[arg-type]
    return asyncio.run(engine.run(scenarios)), progress


def test_min_pass_of_repeated_attempts_decides_the_scenario() -> None:
    script = Scripted(
        {
            "s-1": ["passed", "failed", "passed"],
            "s-2": ["passed", "failed", "failed"],
            "s-3": ["error", "error", "error"],
            "s-4": ["failed", "error", "passed"],
        }
    )
    results, _ = run([scenario(f"s-{n}") for n in range(1, 5)], script, repeat=3, min_pass=2)
    by_id = {r.scenario_id: r for r in results}
    assert by_id["s-1"].status == "passed" and by_id["s-1"].min_pass == 2
    assert by_id["s-2"].status == "failed"
    assert by_id["s-2"].reason == "1/3 runs passed, needs 2: failed #2"
    assert by_id["s-3"].status == "error" and by_id["s-3"].reason.startswith("0/3 runs passed")
    # a failure outranks an error as the reason shown
    assert by_id["s-4"].status == "failed" and by_id["s-4"].reason.endswith("failed #1")
    assert all(len(r.attempts) == 3 for r in results)


def test_a_scenarios_own_repeat_and_min_pass_win_and_min_pass_defaults_to_all() -> None:
    own = scenario("s-1", repeat=2, min_pass=1)
    default = scenario("s-2")
    script = Scripted({"s-1": ["failed", "passed"], "s-2": ["passed", "passed", "failed"]})
    results, _ = run([own, default], script, repeat=3)
    assert [(r.status, len(r.attempts), r.min_pass) for r in results] == [
        ("passed", 2, 1),
        ("failed", 3, 3),
    ]


def test_quarantine_is_reported_on_the_result() -> None:
    flaky = scenario("s-1", tags={"flaky": "true"})
    script = Scripted({"s-1": ["failed"], "s-2": ["failed"]})
    results, _ = run([flaky, scenario("s-2")], script, quarantine=(("flaky", "true"),))
    assert [r.quarantined for r in results] == [True, False]
    assert [r.status for r in results] == ["failed", "failed"]  # the gate, not the engine, forgives


def test_unselected_scenarios_are_skipped_and_never_attempted() -> None:
    script = Scripted({"s-1": ["passed"]})
    chosen = scenario("s-1", tags={"feature": "rooms"})
    other = scenario("s-2", tags={"feature": "spa"})
    results, progress = run(
        [chosen, other], script, selection=Selection(tags=(("feature", "rooms"),))
    )
    assert [r.status for r in results] == ["passed", "skipped"]
    assert results[1].reason == "not selected (tag feature=rooms)"
    assert script.made == [("s-1", 1)]
    assert progress.finished == ["s-1"]  # no progress line per unselected scenario


def test_results_come_back_in_scenario_order_whatever_finishes_first() -> None:
    ids = [f"s-{n}" for n in range(1, 7)]
    # the first scenarios are the slowest: they finish last
    script = Scripted(
        {i: ["passed"] for i in ids}, delay={i: 0.06 - 0.01 * k for k, i in enumerate(ids)}
    )
    results, progress = run([scenario(i) for i in ids], script, concurrency=3)
    assert [r.scenario_id for r in results] == ids
    assert progress.finished != ids  # they did finish out of order
    assert script.peak <= 3  # never more conversations than the concurrency


def test_the_error_brake_stops_booting_after_the_same_agent_cause() -> None:
    ids = [f"s-{n}" for n in range(1, 6)]
    script = Scripted(
        {i: ["error"] for i in ids}, cause={i: "openai: connection refused" for i in ids}
    )
    results, _ = run([scenario(i) for i in ids], script, concurrency=1, max_errors=2)
    attempted = {sid for sid, _ in script.made}
    assert len(attempted) < len(ids)  # the rest were not booted
    assert all(r.status != "passed" for r in results)
    skipped = [r for r in results if r.status == "skipped"]
    assert skipped and all(r.reason for r in skipped)


def test_a_scenarios_duration_is_its_conversations_not_its_wait_for_a_slot() -> None:
    """At c=32 a 10 s conversation once read 25 s (the wait for a boot and a conversation slot
    counted), and JUnit times summed to 50x the run: the duration is the attempts' own time."""
    ids = [f"s-{n}" for n in range(1, 5)]
    script = Scripted({i: ["passed", "passed"] for i in ids}, delay=dict.fromkeys(ids, 0.05))
    results, _ = run([scenario(i) for i in ids], script, concurrency=1, repeat=2)
    # at concurrency 1, the last scenario waited for six conversations before its own two
    assert [r.duration_seconds for r in results] == [0.1] * 4


def test_a_forks_pr_without_secrets_selects_what_a_run_selects_with_the_same_reason() -> None:
    """``--tag``/``--match`` are decided by :class:`Selection` alone: the results a fork's PR
    writes without running (publish/github/fork.py) skip exactly the scenarios a run skips,
    with the reason a run gives, and hold every scenario the run plays as the error."""
    suite = [
        scenario("s-1", tags={"feature": "rooms"}),
        scenario("s-2", tags={"feature": "spa"}),
        scenario("s-3", label="Late checkout", tags={"feature": "rooms"}),
        scenario("s-4", tags={}),
    ]
    selection = Selection(tags=(("feature", "rooms"),), patterns=("late*", "s-1"))
    script = Scripted({"s-1": ["passed"], "s-3": ["passed"]})
    ran, _ = run(suite, script, selection=selection)
    forked = not_run_results(
        suite,
        selection,
        "no secrets",
        agent="a.py",
        scenario_files=["s.yaml"],
        commit=(None, None),
        shard=None,
        argv=[],
    ).scenarios
    skipped = {r.scenario_id: r.reason for r in ran if r.status == "skipped"}
    assert skipped == {r.scenario_id: r.reason for r in forked if r.status == "skipped"}
    assert set(skipped) == {"s-2", "s-4"}
    assert set(skipped.values()) == {"not selected (tag feature=rooms, match 'late*', match 's-1')"}
    assert [r.scenario_id for r in forked if r.status == "error"] == [s for s, _ in script.made]
