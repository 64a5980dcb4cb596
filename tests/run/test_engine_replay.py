"""Record/replay and the sequential test (fake attempts, nothing boots): a scenario that replays
in full gets exactly the attempts of the run it was recorded in, no extra one, and keeps that
run's decision; only a scenario that went live is sampled further."""

from __future__ import annotations

from dataclasses import replace

from test_engine import scenario
from test_engine_sampling import Votes, _Fake, judged, run

from lkeval.results.model import Attempt, Replay
from lkeval.run.attempt import Slot
from lkeval.scenarios.model import Scenario

MAIN = {"steady": ["pass"] * 20, "flaky": ["pass", "fail"] * 10, "changed": ["pass"] * 20}
#: What the agent does now where its behaviour changed (the cassette no longer matches).
NOW = {"changed": ["fail", "pass"] * 10}


class Replaying(Votes):
    """Attempt n of a scenario replays the recorded run's attempt n when one was recorded and
    the scenario is unchanged; anything else runs live (and is recorded)."""

    def __init__(self, recorded: set[tuple[str, int]]) -> None:
        super().__init__(MAIN)
        self.recorded = recorded

    def __call__(self, s: Scenario, attempt_no: int) -> _Replayed:
        self.made.append((s.id, attempt_no))
        return _Replayed(self, s, attempt_no)


class _Replayed(_Fake):
    async def run(self, slot: Slot | None = None) -> Attempt:
        if slot is not None:
            await slot.converse()
        votes: Replaying = self.votes  # type: ignore[assignment]
        key = (self.scenario.id, self.n)
        if self.scenario.id not in NOW and key in votes.recorded:
            record = Replay("replayed", f"{self.scenario.id}.{self.n}.json", calls_replayed=4)
            return replace(judged(MAIN[self.scenario.id][self.n - 1]), replay=record)
        vote = NOW.get(self.scenario.id, MAIN[self.scenario.id])[self.n - 1]
        record = Replay("recorded", f"{self.scenario.id}.{self.n}.json", calls_live=4)
        return replace(judged(vote), replay=record)


def test_replayed_scenarios_get_no_extra_attempt_and_only_live_ones_are_sampled() -> None:
    scenarios = [scenario(sid) for sid in MAIN]
    main = Votes(MAIN)
    recorded_results = {r.scenario_id: r for r in run(scenarios, main)}
    now = Replaying(set(main.made))
    results = {r.scenario_id: r for r in run(scenarios, now)}

    def made(votes: Votes, sid: str) -> list[int]:
        return sorted(n for s, n in votes.made if s == sid)

    for sid in ("steady", "flaky"):  # unchanged: the recorded attempts, all replayed, no more
        assert made(now, sid) == made(main, sid)
        assert all(a.replay and a.replay.fully_replayed for a in results[sid].attempts)
        assert results[sid].status == recorded_results[sid].status
        assert results[sid].sampling == recorded_results[sid].sampling
    assert len(made(main, "flaky")) > len(made(main, "steady"))  # the test needed more there
    # changed: live from its first attempt, and sampled as far as its live votes need
    assert not any(a.replay and a.replay.fully_replayed for a in results["changed"].attempts)
    assert len(made(now, "changed")) > len(made(main, "changed"))
