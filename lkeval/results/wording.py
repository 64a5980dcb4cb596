"""Words for a scenario's outcome and transcript, shared by every report and the progress log.

One wording everywhere means the JUnit failure message, the PR comment and the log line of a
scenario say the same thing, so a reader can search for it across them.
"""

from __future__ import annotations

import re

from lkeval.results.model import Attempt, ScenarioResult, TranscriptItem
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
