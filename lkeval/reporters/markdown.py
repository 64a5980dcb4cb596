"""Markdown for the sticky PR comment and the job summary.

Two hard limits shape it: a PR comment holds 65,536 characters, a job summary 1 MiB. A report
over budget is trimmed, never refused: transcripts shrink first (they are the least dense),
then per-scenario details go (last first), then table rows (passing ones first), each time with
a line saying what was left out and where the full results are. A last-resort cut keeps even a
pathological report (thousands of removed scenarios, a tiny budget) within the limit.

Everything that comes from the agent, the scenario file, an LLM or a results file is inert
(:mod:`lkeval.results.untrusted`): no HTML, links, images or ``@`` mentions in text and table
cells, labels bounded, transcripts and logs in fenced code blocks whose fence outgrows any
backtick run inside.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lkeval.results.baseline import ScenarioChange
from lkeval.results.gate import EXIT_NOTHING_RAN, format_rate, tally
from lkeval.results.wording import (
    attempt_to_show,
    failure_reasons,
    format_transcript,
    is_repeated,
    outcome_line,
    plain,
    ran_attempts,
    seconds,
)
from lkeval.reporters.interface import Report, Reporter
from lkeval.results.model import RunResults, ScenarioResult, Usage
from lkeval.results.untrusted import (
    LABEL_CHARS,
    REASON_CHARS,
    md_cell,
    md_code_block,
    md_text,
)

#: Transcript items shown per failing scenario, tried in order until the report fits.
TRANSCRIPT_LEVELS = (16, 6, 2, 0)
LOG_TAIL_LINES = 10

STATUS_ICON = {"passed": "✅", "failed": "❌", "error": "💥", "skipped": "⏭️"}
CHANGE_TEXT = {
    "regression": "🔻 regression",
    "fixed": "🟢 fixed",
    "new": "🆕 new",
    "removed": "➖ removed",
    "unchanged": "",
}
PARTY_ORDER = ("agent", "caller", "judge")


def text(value: str, limit: int = REASON_CHARS) -> str:
    """Untrusted text for Markdown/HTML context: no tags, links, images or mentions; bounded."""
    return md_text(plain(value), limit)


def cell(value: str) -> str:
    """An untrusted table cell: inert, on one line, bounded."""
    return md_cell(plain(value))


@dataclass
class _Row:
    text: str
    priority: int  # lower is kept longer


@dataclass
class _Doc:
    head: list[str]
    table_header: list[str]
    rows: list[_Row]
    details: list[str]
    tail: list[str]
    where: str
    rows_omitted: int = 0
    details_omitted: int = 0
    cut_note: str = field(default="")

    def render(self) -> str:
        blocks = list(self.head)
        if self.rows:
            blocks.append("\n".join(self.table_header + [r.text for r in self.rows]))
        if self.rows_omitted:
            blocks.append(f"_{self.rows_omitted} more row(s) left out to fit; {self.where}._")
        blocks.extend(self.details)
        if self.details_omitted:
            blocks.append(
                f"_Details of {self.details_omitted} more scenario(s) left out to fit; "
                f"{self.where}._"
            )
        blocks.extend(self.tail)
        return "\n\n".join(blocks) + "\n"


class MarkdownReporter(Reporter):
    """Renders a Markdown report within ``report.max_chars`` / ``report.max_bytes``."""

    name = "markdown"
    suffix = ".md"

    def format(self, report: Report) -> str:
        """The Markdown report, trimmed to its budget and masked."""
        return report.masker.mask(_fit(report))


def _fits(value: str, report: Report) -> bool:
    return (report.max_chars is None or len(value) <= report.max_chars) and (
        report.max_bytes is None or len(value.encode()) <= report.max_bytes
    )


def _excess(value: str, report: Report) -> tuple[int, int]:
    chars = len(value) - report.max_chars if report.max_chars is not None else 0
    size = len(value.encode()) - report.max_bytes if report.max_bytes is not None else 0
    return max(chars, 0), max(size, 0)


def _fit(report: Report) -> str:
    doc = _build(report, TRANSCRIPT_LEVELS[0])
    rendered = doc.render()
    for level in TRANSCRIPT_LEVELS[1:]:
        if _fits(rendered, report):
            return rendered
        doc = _build(report, level)
        rendered = doc.render()
    # Each pass drops at least enough to cover the excess, then re-measures for real: the
    # "left out" notes change length as counts grow, so arithmetic alone could be off by a few.
    while not _fits(rendered, report) and (doc.details or doc.rows):
        need_chars, need_bytes = _excess(rendered, report)
        dropped_chars = dropped_bytes = 0
        while (dropped_chars <= need_chars or dropped_bytes <= need_bytes) and doc.details:
            gone = doc.details.pop()
            doc.details_omitted += 1
            dropped_chars, dropped_bytes = (
                dropped_chars + len(gone),
                dropped_bytes + len(gone.encode()),
            )
        if not doc.details:
            # Least important first (passing, unchanged), later rows before earlier ones.
            order = sorted(range(len(doc.rows)), key=lambda i: (doc.rows[i].priority, i))
            keep = set(order)
            while (dropped_chars <= need_chars or dropped_bytes <= need_bytes) and order:
                index = order.pop()
                keep.discard(index)
                gone_row = doc.rows[index].text
                doc.rows_omitted += 1
                dropped_chars += len(gone_row) + 1
                dropped_bytes += len(gone_row.encode()) + 1
            doc.rows = [row for i, row in enumerate(doc.rows) if i in keep]
        rendered = doc.render()
    if _fits(rendered, report):
        return rendered
    return _cut(rendered, report, doc.where)


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


def _build(report: Report, transcript_items: int) -> _Doc:
    results = report.results
    changes = report.comparison.changes if report.comparison else ()
    by_id = {c.scenario_id: c for c in changes}
    with_baseline = report.comparison is not None
    header = [
        "|   | Scenario | Group | Runs | Time |" + (" vs baseline |" if with_baseline else "")
    ]
    header.append("|:-:|---|---|---|--:|" + ("---|" if with_baseline else ""))
    rows = [_row(s, by_id.get(s.scenario_id), with_baseline) for s in results.scenarios]
    rows += [_removed_row(c) for c in changes if c.kind == "removed"]
    details: list[str] = []
    if report.details:
        details = [
            _details(s, transcript_items)
            for s in results.scenarios
            if s.status in ("failed", "error")
        ]
    tail = []
    if report.run_url:
        tail.append(f"[Full results and artifacts]({report.run_url})")
    tail.append(f"<sub>lk-eval {text(results.metadata.lkeval_version)}</sub>")
    return _Doc(
        head=_head(report),
        table_header=header,
        rows=rows,
        details=details,
        tail=tail,
        where=_where(report),
    )


def _head(report: Report) -> list[str]:
    results, gate = report.results, report.gate
    if gate.exit_code == EXIT_NOTHING_RAN:
        judged_out = any(r.startswith("nothing could be judged") for r in gate.reasons)
        verdict = "❌ nothing could be judged" if judged_out else "❌ nothing could run"
    else:
        verdict = "✅ gate passed" if gate.passed else "❌ gate failed"
    blocks = [f"## {text(report.title)}: {verdict}"]

    t = tally(results)
    counts = [
        f"{t.passed} passed",
        f"{t.failed} failed",
        f"{t.errored} errored",
        f"{t.skipped} skipped",
        f"{t.quarantined} quarantined",
        f"pass rate {format_rate(t.pass_rate)} ({t.passed}/{t.counted})",
    ]
    if report.comparison is not None:
        c = report.comparison
        sha = f" `{text(c.baseline_sha[:12])}`" if c.baseline_sha else ""
        counts.append(
            f"{len(c.regressions)} regressed, {len(c.fixed)} fixed, {len(c.new)} new, "
            f"{len(c.removed)} removed vs baseline{sha}"
        )
    counts.append(seconds(results.metadata.duration_seconds))
    if results.metadata.git_sha:
        counts.append(f"commit `{text(results.metadata.git_sha[:12])}`")
    blocks.append(f"**{t.total} scenarios:** " + " · ".join(counts))
    if gate.reasons:
        blocks.append("\n".join(f"- {text(r)}" for r in gate.reasons))
    if warnings := llm_warnings(report):
        blocks.append("\n".join(f"> ⚠️ **{text(w)}**" for w in warnings))
    usage = _usage_line(results)
    if usage:
        blocks.append(usage)
    return blocks


def llm_warnings(report: Report) -> list[str]:
    """The judge preflight's warning and changed caller/judge models: trust in the verdicts."""
    warnings: list[str] = []
    check = report.results.metadata.judge_check
    if check is not None and check.warning:
        warnings.append(f"Judge preflight: {check.warning}")
    if report.comparison is not None:
        warnings.extend(
            f"{change[0].upper()}{change[1:]} (verdicts may not compare)"
            for change in report.comparison.model_changes
        )
    return warnings


def _usage_line(results: RunResults) -> str:
    usage = results.usage
    if not usage:
        return ""
    parties = [p for p in PARTY_ORDER if p in usage] + sorted(set(usage) - set(PARTY_ORDER))
    parts = [f"{text(p)} {_tokens(usage[p])}" for p in parties]
    total = sum((usage[p] for p in parties), Usage())
    if total.cost_usd is not None:
        parts.append(f"total ${total.cost_usd:.4f}")
    return "**Tokens:** " + " · ".join(parts)


def _tokens(usage: Usage) -> str:
    cost = f" (${usage.cost_usd:.4f})" if usage.cost_usd is not None else ""
    return f"{usage.input_tokens:,} in / {usage.output_tokens:,} out{cost}"


def _icon(scenario: ScenarioResult) -> str:
    return STATUS_ICON.get(scenario.status, "❔")


def _row(scenario: ScenarioResult, change: ScenarioChange | None, with_baseline: bool) -> _Row:
    label = cell(scenario.label) + (" · _quarantined_" if scenario.quarantined else "")
    runs = ""
    if is_repeated(scenario):
        runs = f"{scenario.passes}/{len(ran_attempts(scenario))} (needs {scenario.min_pass})"
    cells = [
        _icon(scenario),
        label,
        cell(scenario.group_name),
        runs,
        seconds(scenario.duration_seconds) if scenario.status != "skipped" else "",
    ]
    kind = change.kind if change else "unchanged"
    if with_baseline:
        cells.append(CHANGE_TEXT[kind])
    bad = scenario.status in ("failed", "error")
    if bad and not scenario.quarantined:
        priority = 0
    elif kind in ("regression", "fixed") or bad:
        priority = 1
    elif kind in ("new", "removed"):
        priority = 2
    else:
        priority = 3
    return _Row("| " + " | ".join(cells) + " |", priority)


def _removed_row(change: ScenarioChange) -> _Row:
    cells = ["➖", cell(change.label), cell(change.group_name), "", "", CHANGE_TEXT["removed"]]
    return _Row("| " + " | ".join(cells) + " |", 2)


def _details(scenario: ScenarioResult, transcript_items: int) -> str:
    quarantined = " (quarantined)" if scenario.quarantined else ""
    summary = (
        f"{_icon(scenario)} <b>{text(scenario.label, LABEL_CHARS)}</b>{quarantined} — "
        f"{text(scenario.group_name)}: {text(outcome_line(scenario))}"
    )
    parts = [f"<details><summary>{summary}</summary>"]
    reasons = failure_reasons(scenario)
    if reasons:
        parts.append("\n".join(_bullet(r) for r in reasons))
    attempt = attempt_to_show(scenario)
    if attempt is not None and transcript_items > 0:
        if attempt.transcript:
            items = attempt.transcript[-transcript_items:]
            earlier = len(attempt.transcript) - len(items)
            heading = "Transcript" + (
                f" (last {len(items)} of {len(attempt.transcript)})" if earlier else ""
            )
            if len(scenario.attempts) > 1:
                number = scenario.attempts.index(attempt) + 1
                heading += f", attempt {number}/{len(scenario.attempts)}"
            parts.append(
                f"{heading}:\n\n{md_code_block(plain(chr(10).join(format_transcript(items))))}"
            )
        if scenario.status == "error" and attempt.log_tail:
            tail = attempt.log_tail[-min(LOG_TAIL_LINES, transcript_items) :]
            where = f" of <code>{text(attempt.log_path)}</code>" if attempt.log_path else ""
            parts.append(
                f"Last {len(tail)} log lines{where}:\n\n{md_code_block(plain(chr(10).join(tail)))}"
            )
    parts.append("</details>")
    return "\n\n".join(parts)


def _bullet(reason: str) -> str:
    indent = "  " if reason.startswith("  ") else ""
    lines = text(reason.strip()).splitlines() or [""]
    return f"{indent}- " + "<br>".join(lines)
