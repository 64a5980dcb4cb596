"""Words for a scenario's outcome, transcript and replay, shared by every report and the log.

One wording everywhere means the JUnit failure message, the PR comment and the log line of a
scenario say the same thing, so a reader can search for it across them.

Record/replay: each attempt of a run with ``--cassettes`` carries a
:class:`~lkeval.results.model.Replay` (docs/replay.md). A reviewer needs two things from them:
per scenario, whether its verdict is main's conversation replayed or was earned live (and if
live, from which call, and why: that call is where the change altered the agent's behaviour);
and for the suite, how much of it replayed and what that saved. The Markdown comment, the job
summary and JUnit all read them from here, so they say the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from lkeval.results.model import (
    NOT_RUN_NO_LLM,
    Attempt,
    Replay,
    RunResults,
    ScenarioResult,
    TranscriptItem,
)
from lkeval.results.pricing import format_cost
from lkeval.text.masking import clip
from lkeval.text.untrusted import strip_ansi, visible

ONE_LINE_LIMIT = 240

_SPACE = re.compile(r"\s+")


def plain(text: str) -> str:
    """``text`` without ANSI colour codes (agent logs are coloured), other control characters
    shown as escapes (``\\x1b``): never raw in a report, and illegal in XML 1.0."""
    return visible(strip_ansi(text), lines=True)


def one_line(text: str, limit: int = ONE_LINE_LIMIT) -> str:
    """Collapse whitespace (newlines included), mask, and only then cut to ``limit``."""
    return clip(_SPACE.sub(" ", text).strip(), limit)


def ran_attempts(scenario: ScenarioResult) -> tuple[Attempt, ...]:
    """The attempts that ran (not skipped)."""
    return tuple(a for a in scenario.attempts if a.status != "skipped")


def is_repeated(scenario: ScenarioResult) -> bool:
    """Whether the scenario was run more than once or needs more than one pass."""
    return len(ran_attempts(scenario)) > 1 or scenario.min_pass > 1


def repeat_summary(scenario: ScenarioResult) -> str | None:
    """``2/3 runs passed, needs 3`` for a repeated scenario; the sequential test's decision
    with its confidence ("passed 3 of 3 — ..."); else None."""
    if scenario.sampling is not None and scenario.sampling.mode == "sequential":
        return scenario.sampling.text
    if not is_repeated(scenario):
        return None
    ran = len(ran_attempts(scenario))
    return f"{scenario.passes}/{ran} runs passed, needs {scenario.min_pass}"


def count(n: int, noun: str) -> str:
    """``1 scenario``, ``2 scenarios``: no more "1 scenarios"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def seconds(value: float) -> str:
    """A duration as ``1.2s``."""
    return f"{value:.1f}s"


def attempt_to_show(scenario: ScenarioResult) -> Attempt | None:
    """The attempt worth showing: the first that did not pass, else the last one."""
    for attempt in scenario.attempts:
        if attempt.status in ("failed", "error"):
            return attempt
    return scenario.attempts[-1] if scenario.attempts else None


def primary_reason(scenario: ScenarioResult) -> str:
    """The single most useful sentence on why a scenario ended as it did."""
    if scenario.reason:
        return scenario.reason
    attempt = attempt_to_show(scenario)
    if attempt is None:
        return ""
    if attempt.reason:
        return attempt.reason
    for expectation in attempt.expectations:
        if not expectation.passed:
            return f"expected {expectation.description}: {expectation.reason}".rstrip(": ")
    for verdict in attempt.verdicts:
        if verdict.verdict != "pass":
            return f"{verdict_name(verdict.source)} {verdict.verdict}: {verdict.reason}"
    return ""


def outcome_line(scenario: ScenarioResult) -> str:
    """One line: repeats (if any) and the primary reason, e.g. for a JUnit message."""
    parts = [p for p in (repeat_summary(scenario), primary_reason(scenario)) if p]
    if not parts:
        return scenario.status
    return one_line(": ".join(parts))


def verdict_name(source: str) -> str:
    """``judge``, ``judge (accuracy)``, ``agent veto``... for a verdict source."""
    if source == "agent":
        return "agent veto"
    if source.startswith("judge:"):
        return f"judge ({source.split(':', 1)[1]})"
    return source


def attempt_reasons(attempt: Attempt) -> list[str]:
    """Full reasons of one attempt: its reason, failed expectations, verdicts with reasoning."""
    lines: list[str] = []
    if attempt.reason:
        lines.append(attempt.reason)
    for e in attempt.expectations:
        if not e.passed:
            where = f" (line {e.line})" if e.line is not None else ""
            why = f" — {e.reason}" if e.reason else ""
            lines.append(f"turn {e.turn}, expectation {e.index + 1}{where}: {e.description}{why}")
    for v in attempt.verdicts:
        if v.source == "agent" and v.verdict == "pass":
            continue  # the agent did not veto: nothing to say
        votes = f" [votes: {', '.join(v.votes)}]" if v.votes else ""
        why = f" — {v.reason}" if v.reason else ""
        lines.append(f"{verdict_name(v.source)}: {v.verdict}{votes}{why}")
    return lines


def failure_reasons(scenario: ScenarioResult) -> list[str]:
    """Every reason a scenario did not pass, attempt by attempt when it was repeated."""
    lines: list[str] = []
    summary = repeat_summary(scenario)
    if summary:
        lines.append(summary)
    if scenario.reason:
        lines.append(scenario.reason)
    attempts = scenario.attempts
    for number, attempt in enumerate(attempts, start=1):
        reasons = [r for r in attempt_reasons(attempt) if r != scenario.reason]
        if len(attempts) > 1:
            lines.append(f"attempt {number}/{len(attempts)}: {attempt.status}")
            if attempt.status != "passed":
                lines.extend("  " + r for r in reasons)
        else:
            lines.extend(reasons)
    return lines


def format_item(item: TranscriptItem) -> str:
    """One transcript item as a readable line (continuation lines indented)."""
    head = f"[{item.turn}] "
    if item.kind == "message":
        text = item.text + (" (interrupted)" if item.interrupted else "")
        if item.said is not None and item.said != item.text:  # audio: heard != said
            text += f" (heard; the caller said: {item.said})"
        if item.spoken_call:
            text += f" (a tool call written as text: {item.spoken_call} was not called)"
        body = f"{item.role or 'message'}: {text}"
    elif item.kind == "function_call":
        body = f"→ call {item.name or '?'}({item.arguments or ''})"
    elif item.kind == "function_call_output":
        flag = " ERROR" if item.is_error else ""
        body = f"← {item.name or 'output'}{flag}: {item.output if item.output is not None else ''}"
    elif item.kind == "agent_handoff":
        if item.old_agent:
            body = f"⇄ handoff {item.old_agent} → {item.new_agent or '(unnamed agent)'}"
        else:  # the session-start handoff of turn 0: none -> the first agent
            body = f"▶ session starts with agent {item.new_agent or '(unnamed)'}"
    elif item.kind == "agent_config_update":
        body = "⚙ agent config update" + (f": {item.text}" if item.text else "")
    else:
        body = f"{item.kind}: {item.text}" if item.text else item.kind
    return head + body.replace("\n", "\n    ")


def format_transcript(items: tuple[TranscriptItem, ...] | list[TranscriptItem]) -> list[str]:
    """The transcript as lines, one item each (items may span lines)."""
    return [format_item(item) for item in items]


# What record/replay did, per scenario and for the suite.


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
