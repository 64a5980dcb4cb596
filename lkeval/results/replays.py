"""What record/replay did, per scenario and for the suite, in the words every report uses.

Each attempt of a run with ``--cassettes`` carries a :class:`~lkeval.results.model.Replay`
(docs/replay.md). A reviewer needs two things from them: per scenario, whether its verdict is
main's conversation replayed or was earned live (and if live, from which call, and why: that
call is where the change altered the agent's behaviour); and for the suite, how much of it
replayed and what that saved. The Markdown comment, the job summary and JUnit all read them
from here, so they say the same.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from lkeval.results.model import NOT_RUN_NO_LLM, Replay, RunResults, ScenarioResult
from lkeval.results.pricing import format_cost
from lkeval.results.wording import count, one_line, ran_attempts

#: How a scenario's replay is summed up: every attempt replayed, some call went live, or a
#: call had no recorded match under ``--cassette-mode replay`` (an error).
REPLAYED, LIVE, MISSED = "replayed", "live", "missed"


def scenario_replay(scenario: ScenarioResult) -> Replay | None:
    """The replay record that speaks for the scenario: its first attempt that did not replay
    fully (a miss first), else its first replayed one; None when none had a cassette."""
    records = [a.replay for a in ran_attempts(scenario) if a.replay is not None]
    for wanted in ("missed", "partial", "recorded"):
        for record in records:
            if record.mode == wanted:
                return record
    return records[0] if records else None


def scenario_state(scenario: ScenarioResult) -> str | None:
    """:data:`REPLAYED`, :data:`LIVE` or :data:`MISSED`; None without cassettes."""
    record = scenario_replay(scenario)
    if record is None:
        return None
    if record.mode == "missed":
        return MISSED
    # a scenario with an attempt that had no cassette at all is live too
    replayed = all(a.replay is not None and a.replay.fully_replayed for a in ran_attempts(scenario))
    return REPLAYED if replayed else LIVE


def replay_short(scenario: ScenarioResult) -> str:
    """A table cell: ``replayed``, ``live from agent call 3``, ``live (recorded)``, ``replay
    miss at judge call 1``; empty without cassettes."""
    record, state = scenario_replay(scenario), scenario_state(scenario)
    if record is None or state is None:
        return ""
    if state == REPLAYED:
        return "replayed"
    where = _where(record)
    if state == MISSED:
        return f"replay miss at {where}" if where else "replay miss"
    return f"live from {where}" if where else "live (recorded)"


def replay_text(scenario: ScenarioResult, limit: int = 300) -> str:
    """One line: ``replayed`` or ``live from the agent's call 3: <the first differing field
    and a short diff>`` (``live: <why the cassette was not used>`` when it never replayed);
    empty without cassettes."""
    record, state = scenario_replay(scenario), scenario_state(scenario)
    if record is None or state is None:
        return ""
    if state == REPLAYED:
        return "replayed (every call from the cassette)"
    where = _where(record, possessive=True)
    head = {
        MISSED: f"replay miss at {where}" if where else "replay miss",
        LIVE: f"live from {where}" if where else "live",
    }[state]
    reason = record.reason
    if record.live_from_call is not None:  # the tape's reason names the call too: once is enough
        reason = reason.removeprefix(
            f"replay miss at {record.client}'s call {record.live_from_call}: "
        )
    return one_line(f"{head}: {reason}" if reason else head, limit)


def _where(record: Replay, possessive: bool = False) -> str:
    if record.live_from_call is None:
        return ""
    client = record.client or "a client"
    if possessive:
        return f"the {client}'s call {record.live_from_call}"
    return f"{client} call {record.live_from_call}"


@dataclass(frozen=True)
class ReplayTotals:
    """The suite's record/replay: scenarios by state, calls, and the cost the replay saved."""

    replayed: int
    live: int
    missed: int
    calls_replayed: int
    calls_live: int
    saved_usd: float | None

    @property
    def scenarios(self) -> int:
        """Scenarios that ran with a cassette directory."""
        return self.replayed + self.live + self.missed


def has_replays(results: RunResults) -> bool:
    """Some attempt of the run had a cassette (``--cassettes``)."""
    return any(a.replay is not None for s in results.scenarios for a in s.attempts)


def replay_totals(results: RunResults) -> ReplayTotals | None:
    """The suite's totals; None when no attempt had a cassette (a run without ``--cassettes``)."""
    states = [scenario_state(s) for s in results.scenarios]
    records = [a.replay for s in results.scenarios for a in ran_attempts(s) if a.replay is not None]
    if not records:
        return None
    saved = [r.saved_usd for r in records if r.saved_usd is not None]
    return ReplayTotals(
        replayed=states.count(REPLAYED),
        live=states.count(LIVE),
        missed=states.count(MISSED),
        calls_replayed=sum(r.calls_replayed for r in records),
        calls_live=sum(r.calls_live for r in records),
        saved_usd=sum(saved) if saved else None,
    )


def replay_line(results: RunResults) -> str:
    """The suite line: ``18 scenarios replayed, 2 live · 214 LLM/HTTP calls replayed, 31 live
    · saved $0.4210``; empty without cassettes."""
    totals = replay_totals(results)
    if totals is None:
        return ""
    scenarios = [f"{count(totals.replayed, 'scenario')} replayed", f"{totals.live} live"]
    if totals.missed:
        scenarios.append(f"{totals.missed} replay {'miss' if totals.missed == 1 else 'misses'}")
    calls = f"{count(totals.calls_replayed, 'call')} replayed, {totals.calls_live} live"
    if totals.saved_usd is not None:
        saved = f"saved {format_cost(totals.saved_usd)} and {count(totals.calls_replayed, 'call')}"
    else:
        saved = f"saved {count(totals.calls_replayed, 'call')} (unpriced)"
    return " · ".join([", ".join(scenarios), calls, saved])


def without_credentials(results: RunResults) -> RunResults:
    """A run with no LLM credentials, from cassettes (a fork's pull request): each scenario
    that did not replay fully needed a live call, so it was not evaluated. It becomes an
    ``error`` whose reason begins with :data:`~lkeval.results.model.NOT_RUN_NO_LLM` and says
    which call it needed; the gate then says what share was evaluated and fails."""
    scenarios = []
    for scenario in results.scenarios:
        state = scenario_state(scenario)
        if scenario.status != "skipped" and state != REPLAYED:
            needed = replay_text(scenario) or "no cassette"
            reason = f"{NOT_RUN_NO_LLM}: {needed}"
            scenario = replace(scenario, status="error", reason=reason, sampling=None)
        scenarios.append(scenario)
    metadata = replace(results.metadata, no_credentials=True)
    return replace(results, metadata=metadata, scenarios=tuple(scenarios))
