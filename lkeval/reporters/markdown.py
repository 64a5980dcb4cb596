"""Markdown for the sticky PR comment and the job summary.

The reader decides in the first lines: the verdict and why, then what needs attention
(regressions, new failures, budget misses, fixed), then the suite against the baseline. Every
failure comes with its reasons (each once), the agent's own check and its transcript, all
before any passing row; the table of all scenarios and the latency chart come last, collapsed.

Two hard limits shape it: a PR comment holds 65,536 characters, a job summary 1 MiB. A report
over budget is trimmed, never refused, in this order: passing rows, then transcripts
(shortened, then gone), the chart, the rest of the table, then each reason is cut to one line.
A failure's reason is the last thing to go: only a budget too small for the reasons alone
drops whole failures (last first, with a note), and a final cut keeps even a pathological
report within the limit.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from lkeval.reporters.call_links import call_files, call_links
from lkeval.reporters.interface import Report, Reporter
from lkeval.reporters.markdown_parts import (
    cell,
    counts_line,
    failure_block,
    icon,
    interrupted_note,
    is_bad,
    latency_chart,
    llm_warnings,
    metrics_lines,
    name_list,
    removed_row,
    suite_delta_line,
    table_header,
    table_row,
    text,
    verdict_line,
)
from lkeval.results.baseline import ScenarioChange
from lkeval.results.calibration import cannot_tell, describe_calibration
from lkeval.results.model import RunResults, ScenarioResult
from lkeval.results.sampling import run_cost_line
from lkeval.results.sensitivity import sensitivity_line
from lkeval.results.wording import (
    LIVE,
    MISSED,
    attempt_to_show,
    count,
    has_replays,
    is_repeated,
    replay_line,
    replay_text,
    scenario_state,
)
from lkeval.text.masking import mask
from lkeval.text.untrusted import LABEL_CHARS

__all__ = ["MarkdownReporter", "cell", "llm_warnings", "text"]


@dataclass(frozen=True)
class Level:
    """How much of the report to keep; the levels below are tried in order."""

    passing_rows: bool = True
    transcript_items: int = 16
    chart: bool = True
    table: bool = True
    short_reasons: bool = False
    # ``lkeval pin ...`` under each failed conversation: only while there is room for it
    pin_hint: bool = True


LEVELS = (
    Level(),
    Level(passing_rows=False),
    Level(passing_rows=False, transcript_items=16, pin_hint=False),
    Level(passing_rows=False, transcript_items=6, pin_hint=False),
    Level(passing_rows=False, transcript_items=2, pin_hint=False),
    Level(passing_rows=False, transcript_items=0, pin_hint=False),
    Level(passing_rows=False, transcript_items=0, chart=False, pin_hint=False),
    Level(passing_rows=False, transcript_items=0, chart=False, table=False, pin_hint=False),
    Level(
        passing_rows=False,
        transcript_items=0,
        chart=False,
        table=False,
        short_reasons=True,
        pin_hint=False,
    ),
)


class MarkdownReporter(Reporter):
    """Renders a Markdown report within ``report.max_chars`` / ``report.max_bytes``."""

    name = "markdown"
    description = "the Markdown report"
    label = "Markdown"

    def format(self, report: Report) -> str:
        """The Markdown report, trimmed to its budget and masked."""
        return mask(_fit(report))


def _fits(value: str, report: Report) -> bool:
    return (report.max_chars is None or len(value) <= report.max_chars) and (
        report.max_bytes is None or len(value.encode()) <= report.max_bytes
    )


def _fit(report: Report) -> str:
    rendered = ""
    for level in LEVELS:
        rendered = _render(report, level, len(_failing(report)))
        if _fits(rendered, report):
            return rendered
    # Reasons alone do not fit: drop whole failures from the end, measuring each time.
    low, high = 0, len(_failing(report))
    while low < high:  # the most failures that fit, by bisection (renders stay O(n log n))
        middle = (low + high + 1) // 2
        if _fits(_render(report, LEVELS[-1], middle), report):
            low = middle
        else:
            high = middle - 1
    rendered = _render(report, LEVELS[-1], low)
    return rendered if _fits(rendered, report) else _cut(rendered, report, _where(report))


def _cut(value: str, report: Report, where: str) -> str:
    """Last resort: cut the text itself, ending with a note when there is room for one."""
    note = f"\n\n_…cut to fit the size limit; {where}._\n"
    for suffix in (note, ""):
        chars = report.max_chars if report.max_chars is not None else len(value)
        size = report.max_bytes if report.max_bytes is not None else len(value.encode())
        budget_chars, budget_bytes = chars - len(suffix), size - len(suffix.encode())
        if budget_chars < 0 or budget_bytes < 0:
            continue
        head = value[:budget_chars]
        head = head.encode()[:budget_bytes].decode(errors="ignore")
        return head + suffix
    return ""


def _where(report: Report) -> str:
    if report.run_url:
        return f"see the [full results]({report.run_url})"
    return "see the full results files (JUnit, JSON)"


def _changes(report: Report) -> dict[str, ScenarioChange]:
    changes = report.comparison.changes if report.comparison else ()
    return {c.scenario_id: c for c in changes}


#: Known-flaky scenarios named in the comment (the rest are counted).
FLAKY_LISTED = 10

_SECTIONS = (
    "🔻 Regressions",
    "❌ New failures",
    "❌ Still failing",
    "🟡 Quarantined, not blocking",
)


def _section(scenario: ScenarioResult, changes: dict[str, ScenarioChange]) -> int:
    """Which failure section a failing scenario belongs to (an index into ``_SECTIONS``)."""
    if scenario.quarantined:
        return 3
    change = changes.get(scenario.scenario_id)
    if change is None or change.kind == "new":
        return 1
    return 0 if change.kind == "regression" else 1 if change.unaccounted else 2


def _failing(report: Report) -> list[ScenarioResult]:
    """Failures in reading order: regressions, new (or with no verdict in the baseline), still
    failing, then quarantined."""
    changes = _changes(report)
    bad = [s for s in report.results.scenarios if is_bad(s)]
    return sorted(bad, key=lambda s: _section(s, changes))


def _render(report: Report, level: Level, failures_kept: int) -> str:
    head = verdict_line(report)
    blocks = [head]
    note = interrupted_note(report.results)
    blocks += [note] if note else []
    blocks.append(counts_line(report))
    if replayed := replay_line(report.results):
        blocks.append(f"**Record/replay:** {text(replayed)}")
    if cost := run_cost_line(report.results):  # what sampling cost, how sure the gate is
        blocks.append(f"<sub>{text(cost)}<br>{text(sensitivity_line(report.results))}</sub>")
    # Budget misses have their own section below: each reason once.
    reasons = [
        r for r in report.gate.reasons if not r.startswith("budget missed") and text(r) not in head
    ]
    if reasons:
        blocks.append("\n".join(f"- {text(r)}" for r in reasons))
    if warnings := llm_warnings(report):
        blocks.append("\n".join(f"> ⚠️ **{text(w)}**" for w in warnings))
    blocks += _failure_sections(report, level, failures_kept)
    blocks += _lists(report)
    if report.comparison is not None:
        blocks.append(suite_delta_line(report.comparison))
    blocks += metrics_lines(report.results)
    blocks += _table(report, level)
    if level.table and (calls := calls_list(report)):
        blocks.append(calls)
    chart = latency_chart(report.results, report.comparison) if level.chart else ""
    if chart and report.details:
        blocks.append(chart)
    if report.run_url:
        blocks.append(f"[Full results and artifacts]({report.run_url})")
    blocks.append(f"<sub>lk-eval {text(report.results.metadata.lkeval_version)}</sub>")
    return "\n\n".join(blocks) + "\n"


def _failure_sections(report: Report, level: Level, kept: int) -> list[str]:
    changes = _changes(report)
    failing = _failing(report)
    sizes = Counter(_section(s, changes) for s in failing)
    blocks: list[str] = []
    current = -1
    for scenario in failing[:kept]:
        section = _section(scenario, changes)
        if section != current:
            title = _SECTIONS[section]
            if report.comparison is None and section == 1:
                title = "❌ Failures"  # without a baseline nothing is "new"
            blocks.append(f"### {title} ({sizes[section]})")
            current = section
        blocks.append(
            failure_block(
                scenario,
                changes.get(scenario.scenario_id),
                level.transcript_items,
                level.short_reasons,
                report.details,
                pin_hint=level.pin_hint,
                links=report,
            )
        )
    if kept < len(failing):
        left = len(failing) - kept
        blocks.append(f"_{count(left, 'more failure')} left out to fit; {_where(report)}._")
    return blocks


def _lists(report: Report) -> list[str]:
    blocks = []
    if live := live_list(report.results):
        blocks.append(live)
    misses = report.gate.budget_misses
    if misses:
        blocks.append(name_list(f"⏱️ Budget misses ({len(misses)})", [text(m.text) for m in misses]))
    if report.comparison is not None and report.comparison.fixed:
        fixed = [
            f"{text(c.label, LABEL_CHARS)} · {text(c.group_name)}" for c in report.comparison.fixed
        ]
        blocks.append(name_list(f"🟢 Fixed ({len(fixed)})", fixed))
    if report.comparison is not None and report.comparison.known_flaky:
        flaky = [
            f"{text(c.label, LABEL_CHARS)} · {text(c.history.text)}"
            for c in report.comparison.known_flaky
            if c.history is not None
        ]
        runs = report.comparison.history_runs
        title = f"🎲 Known flaky on main ({len(flaky)}, last {runs} runs)"
        more = [f"and {len(flaky) - FLAKY_LISTED} more"] if len(flaky) > FLAKY_LISTED else []
        blocks.append(name_list(title, flaky[:FLAKY_LISTED] + more))
    if report.comparison is not None:
        blind = [
            f"{text(c.label, LABEL_CHARS)} · {text(describe_calibration(c.calibration))}"
            for c in report.comparison.changes
            if c.calibration is not None and cannot_tell(c.calibration)
        ]
        if blind:
            title = f"⚖️ The judge cannot tell good from broken ({len(blind)})"
            more = [f"and {len(blind) - FLAKY_LISTED} more"] if len(blind) > FLAKY_LISTED else []
            blocks.append(name_list(title, blind[:FLAKY_LISTED] + more))
    return blocks


#: Live scenarios listed by name in the comment, at most (the table has them all).
LIVE_LISTED = 10


def live_list(results: RunResults) -> str:
    """The scenarios that did not replay, each with the call that went live and why: where
    the change under test altered the agent's behaviour (empty when all replayed)."""
    live = [s for s in results.scenarios if scenario_state(s) in (LIVE, MISSED)]
    if not live or len(live) == len(results.scenarios):  # all live (record): nothing to point at
        return ""
    lines = [f"{text(s.label, LABEL_CHARS)} · {text(replay_text(s))}" for s in live[:LIVE_LISTED]]
    if len(live) > LIVE_LISTED:
        lines.append(f"and {len(live) - LIVE_LISTED} more (see the table)")
    return name_list(f"🔁 Live, not replayed ({len(live)})", lines)


#: Calls linked by name in the report, at most (the results file has them all).
CALLS_LISTED = 50


def calls_list(report: Report) -> str:
    """Every audio scenario's call (the attempt the report shows), its WAV and SVG linked as
    this report can link them (:mod:`lkeval.reporters.call_links`); "" when none was kept."""
    calls = [
        (scenario, attempt)
        for scenario in report.results.scenarios
        if (attempt := attempt_to_show(scenario)) is not None and call_files(attempt.call)
    ]
    if not calls:
        return ""
    lines = [
        f"- {icon(s)} {text(s.label, LABEL_CHARS)}: {call_links(a.call, report)}"
        for s, a in calls[:CALLS_LISTED]
    ]
    if len(calls) > CALLS_LISTED:
        lines.append(f"- and {len(calls) - CALLS_LISTED} more (in the results file)")
    title = f"🎧 The calls, to hear and see ({len(calls)})"
    if not report.details:
        return f"**{title}**\n\n" + "\n".join(lines)
    return f"<details><summary>{title}</summary>\n\n" + "\n".join(lines) + "\n\n</details>"


def _table(report: Report, level: Level) -> list[str]:
    results, comparison = report.results, report.comparison
    if not level.table:
        if not results.scenarios:
            return []
        left = count(len(results.scenarios), "scenario")
        return [f"_The table of all {left} was left out to fit; {_where(report)}._"]
    changes = _changes(report)
    runs = any(is_repeated(s) for s in results.scenarios)
    bad = [s for s in results.scenarios if is_bad(s)]
    rest = [s for s in results.scenarios if not is_bad(s)]
    replays, baseline = has_replays(results), comparison is not None
    rows = [table_row(s, changes.get(s.scenario_id), runs, baseline, replays) for s in bad]
    removed = [c for c in changes.values() if c.kind == "removed"]
    omitted = 0
    if level.passing_rows:
        rows += [table_row(s, changes.get(s.scenario_id), runs, baseline, replays) for s in rest]
        rows += [removed_row(c, runs) for c in removed]
    else:
        omitted = len(rest) + len(removed)
    if not rows and not omitted:
        return []
    body = "\n".join(table_header(results, comparison) + rows) if rows else ""
    if omitted:
        what = "row(s) of passing, skipped or removed scenarios"
        body += f"\n\n_{omitted} {what} left out to fit; {_where(report)}._"
    total = len(results.scenarios) + len(removed)
    if not report.details:
        return [body.strip()]
    what = "status, turns, p95 latency, cost" + (", change" if comparison is not None else "")
    summary = f"All {count(total, 'scenario')}: {what}"
    return [f"<details><summary>{summary}</summary>\n\n{body.strip()}\n\n</details>"]
