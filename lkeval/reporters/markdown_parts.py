"""The pieces of the Markdown report, in the order a reviewer reads them.

Verdict and why, then what needs attention (regressions, new failures, budget misses, fixed),
then the suite's figures against the baseline, then everything else collapsed. Every piece is
a pure function of the report; :mod:`lkeval.reporters.markdown` assembles them and trims the
whole to its size budget.

Everything that comes from the agent, the scenario file, an LLM or a results file is inert
(:mod:`lkeval.text.untrusted`): no HTML, links, images or ``@`` mentions in text and table
cells, labels bounded, transcripts and logs in fenced code blocks whose fence outgrows any
backtick run inside.
"""

from __future__ import annotations

from collections.abc import Sequence

from lkeval.errors import ExitCode
from lkeval.reporters.call_links import call_links
from lkeval.reporters.interface import Report
from lkeval.results.baseline import Comparison, MetricDelta, ScenarioChange
from lkeval.results.gate import format_rate, tally
from lkeval.results.metrics import (
    format_ms,
    format_spread,
    latency_conditions,
    scenario_metrics,
    suite_metrics,
)
from lkeval.results.model import Attempt, RunResults, ScenarioResult, Usage
from lkeval.results.pricing import format_cost, total_cost
from lkeval.results.wording import (
    attempt_to_show,
    count,
    failure_reasons,
    format_transcript,
    has_replays,
    is_repeated,
    one_line,
    plain,
    ran_attempts,
    replay_short,
    replay_text,
    seconds,
)
from lkeval.text.untrusted import LABEL_CHARS, REASON_CHARS, md_cell, md_code_block, md_text

LOG_TAIL_LINES = 10
CHART_SCENARIOS = 10
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


def icon(scenario: ScenarioResult) -> str:
    """The status icon of a scenario."""
    return STATUS_ICON.get(scenario.status, "❔")


def is_bad(scenario: ScenarioResult) -> bool:
    """Failed or errored (quarantined or not)."""
    return scenario.status in ("failed", "error")


# --- the head -----------------------------------------------------------------------------


def verdict_line(report: Report) -> str:
    """``## lk-eval: ❌ gate failed — 1 scenario regressed vs the baseline, 2 budgets missed``."""
    gate = report.gate
    if gate.exit_code == ExitCode.NOTHING_RAN:
        judged_out = any(r.startswith("nothing could be judged") for r in gate.reasons)
        verdict = "❌ nothing could be judged" if judged_out else "❌ nothing could run"
    else:
        verdict = "✅ gate passed" if gate.passed else "❌ gate failed"
    budget = sum(1 for r in gate.reasons if r.startswith("budget missed"))
    others = [r.split(": ", 1)[0] for r in gate.reasons if not r.startswith("budget missed")]
    if not gate.passed:  # the blocking reasons, not the notes that follow them
        others = [r for r in others if "not blocking" not in r and not r.startswith("no ")]
    why = others[:2] if not gate.passed else others[:1]
    if budget:
        why.append(count(budget, "budget") + " missed" + (" (not blocking)" if gate.passed else ""))
    return f"## {text(report.title)}: {verdict}" + (f" — {text(', '.join(why))}" if why else "")


def counts_line(report: Report) -> str:
    """Scenario counts, pass rate, baseline tally, duration, commit."""
    results = report.results
    t = tally(results)
    counts = [
        f"{t.passed} passed",
        f"{t.failed} failed",
        f"{t.errored} errored",
        f"{t.skipped} skipped",
        f"{t.quarantined} quarantined",
        f"pass rate {format_rate(t.pass_rate)} ({t.passed}/{t.counted})",
    ]
    c = report.comparison
    if c is not None:
        sha = f" `{text(c.baseline_sha[:12])}`" if c.baseline_sha else ""
        counts.append(
            f"{len(c.regressions)} regressed, {len(c.fixed)} fixed, {len(c.new)} new, "
            f"{len(c.removed)} removed vs baseline{sha}"
        )
    counts.append(seconds(results.metadata.duration_seconds))
    if results.metadata.git_sha:
        counts.append(f"commit `{text(results.metadata.git_sha[:12])}`")
    return f"**{count(t.total, 'scenario')}:** " + " · ".join(counts)


def interrupted_note(results: RunResults) -> str:
    """A warning line for a run stopped early (its results are partial)."""
    if not results.metadata.interrupted:
        return ""
    done = sum(1 for s in results.scenarios if s.attempts)
    return (
        f"> ⚠️ **The run was interrupted:** partial results, {count(done, 'scenario')} "
        "reached an outcome. Scenarios that did not are missing or marked as errors."
    )


def suite_delta_line(comparison: Comparison) -> str:
    """``pass rate 92% → 88% (−4), p95 1.31 s → 1.58 s (+21%), cost $0.84 → $0.97``."""
    rate = comparison.pass_rate
    parts = [f"pass rate {_pct(rate.before)} → {_pct(rate.after)}{_points(rate)}"]
    lat = comparison.latency_p95
    if lat.before is not None or lat.after is not None:
        parts.append(f"p95 {format_ms(lat.before)} → {format_ms(lat.after)}{_percent(lat)}")
    cost = comparison.cost
    before = "unpriced" if cost.before is None else format_cost(cost.before)
    after = "unpriced" if cost.after is None else format_cost(cost.after)
    parts.append(f"cost {before} → {after}{_percent(cost)}")
    sha = f" `{text(comparison.baseline_sha[:12])}`" if comparison.baseline_sha else ""
    return f"**vs baseline{sha}{_baseline_run(comparison)}:** " + ", ".join(parts)


def _baseline_run(comparison: Comparison) -> str:
    """`` ([main run #12](…))`` for a baseline fetched from a run (a file's path: nothing)."""
    url = comparison.baseline_url
    if not url:
        return ""
    run = text(comparison.baseline_source.split(" (", 1)[0], 80)
    safe = url.startswith("https://") and not any(c in url for c in ' ()<>[]"\n')
    return f" ([{run}]({url}))" if safe else f" ({run})"


def _pct(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate * 100:.0f}%"


def _points(delta: MetricDelta) -> str:
    if delta.before is None or delta.after is None:
        return ""
    points = round((delta.after - delta.before) * 100)
    return f" ({_signed(points, '')})"


def _percent(delta: MetricDelta) -> str:
    pct = delta.percent
    return "" if pct is None else f" ({_signed(round(pct), '%')})"


def _signed(value: float, unit: str) -> str:
    return (
        f"+{value:g}{unit}" if value > 0 else f"−{abs(value):g}{unit}" if value < 0 else f"±0{unit}"
    )


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


def metrics_lines(results: RunResults) -> list[str]:
    """The suite's latency and its tokens and cost per party."""
    suite = suite_metrics(results)
    lines = []
    if suite.latency is not None:
        line = f"**Latency:** {format_spread(suite.latency)} over {count(suite.turns, 'turn')}"
        if suite.ttft is not None:
            line += f" · TTFT {format_spread(suite.ttft)}"
        if suite.first_audio is not None:  # audio: the caller's wait, and the agent's own figure
            line += f" · first audio {format_spread(suite.first_audio)}"
            line += f" · agent e2e_latency {format_spread(suite.e2e)}"
        if conditions := latency_conditions(results.metadata):
            line += f" ({text(conditions)})"
        lines.append(line)
    if suite.usage:
        usage = suite.usage
        parties = [p for p in PARTY_ORDER if p in usage] + sorted(set(usage) - set(PARTY_ORDER))
        parts = [f"{text(p)} {_tokens(usage[p])}" for p in parties]
        parts.append("total " + text(format_cost(*total_cost(usage))))
        lines.append("**Tokens and cost:** " + " · ".join(parts))
    return lines


def _tokens(usage: Usage) -> str:
    models = f", {text(', '.join(usage.models))}" if usage.models else ""
    cost = format_cost(usage.cost_usd, usage.unpriced)
    return f"{usage.input_tokens:,} in / {usage.output_tokens:,} out{models} ({text(cost)})"


# --- failures -----------------------------------------------------------------------------


def failure_block(
    scenario: ScenarioResult,
    change: ScenarioChange | None,
    transcript_items: int,
    short_reasons: bool,
    collapsible: bool,
    pin_hint: bool = True,
    links: Report | None = None,
) -> str:
    """A failing scenario: where it is, every reason once, the agent's own check, transcript;
    an audio call's files linked as ``links`` (the report) can link them."""
    tags = [text(scenario.group_name)]
    if change is not None and change.kind in ("regression", "new"):
        tags.append(CHANGE_TEXT[change.kind])
    elif change is not None and change.unaccounted:
        tags.append(no_verdict_text(change))
    if scenario.quarantined:
        tags.append("quarantined, not blocking")
    tags.append(f"<code>{text(scenario.file)}</code> line {scenario.line}")
    parts = [f"**{icon(scenario)} {text(scenario.label, LABEL_CHARS)}** · " + " · ".join(tags)]
    reasons = failure_reasons(scenario) or [scenario.status]
    if change is not None and change.history_verdict is not None:
        reasons.append(f"history: {change.history_verdict.text}")
    elif change is not None and change.history is not None:
        reasons.append(f"history: {change.history.text}")
    reasons.append(replay_text(scenario))
    reasons.append(_agent_check(scenario))
    if short_reasons:
        reasons = [("  " if r.startswith("  ") else "") + one_line(r) for r in reasons]
    parts.append("\n".join(_bullet(r) for r in reasons if r))
    attempt = attempt_to_show(scenario)
    if attempt is not None and transcript_items > 0 and collapsible:
        if attempt.transcript:
            items = attempt.transcript[-transcript_items:]
            shown = len(items) < len(attempt.transcript)
            heading = "Transcript" + (
                f" (last {len(items)} of {len(attempt.transcript)})" if shown else ""
            )
            if len(scenario.attempts) > 1:
                heading += (
                    f", attempt {scenario.attempts.index(attempt) + 1}/{len(scenario.attempts)}"
                )
            parts.append(_collapsed(heading, "\n".join(format_transcript(items))))
        if scenario.status == "error" and attempt.log_tail:
            tail = attempt.log_tail[-min(LOG_TAIL_LINES, transcript_items) :]
            where = f" of <code>{text(attempt.log_path)}</code>" if attempt.log_path else ""
            parts.append(_collapsed(f"Last {len(tail)} log lines{where}", "\n".join(tail)))
        if listed := call_links(attempt.call, links):
            parts.append(f"The call, to hear and see (with the run's logs): {listed}")
        if pin_hint and (pin := pin_command(scenario, attempt)):
            parts.append(f"Keep this conversation as a test: <code>{text(pin)}</code>")
    return "\n\n".join(parts)


def pin_command(scenario: ScenarioResult, attempt: Attempt) -> str:
    """``lkeval pin ...`` for a failed attempt that had a conversation (else ""): the caller's
    lines become a scripted scenario in the scenario's own file (docs/pin.md)."""
    if attempt.status != "failed" or not any(i.role == "user" for i in attempt.transcript):
        return ""
    number = scenario.attempts.index(attempt) + 1
    return (
        f"lkeval pin --results results.json --scenario {scenario.scenario_id} "
        f"--attempt {number} --into {scenario.file}"
    )


def _agent_check(scenario: ScenarioResult) -> str:
    """The agent's own verdict, stated even when it passed or did not run (once: a veto
    is already among the reasons)."""
    attempt = attempt_to_show(scenario)
    if attempt is None or any(
        v.source == "agent" and v.verdict != "pass" for v in attempt.verdicts
    ):
        return ""
    state = attempt.agent_check or "did not run (the attempt ended before it)"
    return f"agent's own check (on_simulation_end): {state}"


def _collapsed(summary: str, body: str) -> str:
    block = md_code_block(plain(body))
    return f"<details><summary>{summary}</summary>\n\n{block}\n\n</details>"


def _bullet(reason: str) -> str:
    indent = "  " if reason.startswith("  ") else ""
    lines = text(reason.strip()).splitlines() or [""]
    return f"{indent}- " + "<br>".join(lines)


def name_list(title: str, lines: Sequence[str]) -> str:
    """A short titled list (budget misses, fixed scenarios)."""
    return f"### {title}\n\n" + "\n".join(f"- {line}" for line in lines)


# --- the table and the chart ----------------------------------------------------------------


def table_header(results: RunResults, comparison: Comparison | None) -> list[str]:
    """The header of the all-scenarios table; a Runs column only when something repeated."""
    runs = any(is_repeated(s) for s in results.scenarios)
    names = ["  ", "Scenario", "Group"] + (["Runs"] if runs else []) + ["Turns", "p95", "Cost"]
    align = [":-:", "---", "---"] + (["---"] if runs else []) + ["--:", "--:", "--:"]
    if has_replays(results):
        names.append("Replay")
        align.append("---")
    if comparison is not None:
        names.append("vs baseline")
        align.append("---")
    return ["| " + " | ".join(names) + " |", "|" + "|".join(align) + "|"]


def table_row(
    scenario: ScenarioResult,
    change: ScenarioChange | None,
    runs: bool,
    with_baseline: bool,
    replays: bool = False,
) -> str:
    """One scenario's row: status, turns, p95, cost, replayed or live (with ``--cassettes``),
    and its change against the baseline."""
    label = cell(scenario.label) + (" · _quarantined_" if scenario.quarantined else "")
    cells = [icon(scenario), label, cell(scenario.group_name)]
    if runs:
        repeated = is_repeated(scenario)
        ran = len(ran_attempts(scenario))
        if scenario.sampling is not None and scenario.sampling.mode == "sequential":
            cells.append(f"{scenario.passes}/{ran} ({scenario.sampling.outcome})")
        else:
            cells.append(
                f"{scenario.passes}/{ran} (needs {scenario.min_pass})" if repeated else "1"
            )
    m = scenario_metrics(scenario)
    skipped = scenario.status == "skipped"
    cells += [
        "" if skipped else str(m.turns),
        "" if m.latency is None else format_ms(m.latency.p95),
        "" if skipped or not m.usage else _short_cost(m.cost_usd, m.unpriced),
    ]
    if replays:
        cells.append(replay_short(scenario))
    if with_baseline:
        cells.append(_change_cell(change))
    return "| " + " | ".join(cells) + " |"


def _short_cost(cost: float | None, unpriced: tuple[str, ...]) -> str:
    if cost is None:
        return "unpriced"
    return format_cost(cost) + (" + unpriced" if unpriced else "")


def no_verdict_text(change: ScenarioChange) -> str:
    """``🆕 no verdict in the baseline (skipped there)``: a failure main never showed, which
    blocks under ``--fail-on regression`` like a new scenario's."""
    return f"🆕 no verdict in the baseline ({change.baseline_without_verdict} there)"


def _change_cell(change: ScenarioChange | None) -> str:
    if change is None:
        return ""
    parts = [CHANGE_TEXT[change.kind]] if CHANGE_TEXT[change.kind] else []
    if change.kind != "new" and change.unaccounted:
        parts.append(no_verdict_text(change))
    if change.history is not None:
        parts.append(f"main {change.history.rate * 100:.0f}% ({change.history.state})")
    latency = change.latency_p95
    if latency is not None and latency.percent is not None and abs(latency.percent) >= 1:
        noise = " (noise)" if latency.noisy else ""
        parts.append(f"p95 {_signed(round(latency.percent), '%')}{noise}")
    before = change.cost.before if change.cost else None
    after = change.cost.after if change.cost else None
    if before is not None and after is not None and abs(after - before) >= 0.00005:
        parts.append(f"cost {'+' if after > before else '−'}${abs(after - before):.4f}")
    return " · ".join(parts)


def removed_row(change: ScenarioChange, runs: bool) -> str:
    """A scenario of the baseline that this run no longer has."""
    cells = ["➖", cell(change.label), cell(change.group_name)] + ([""] if runs else [])
    return "| " + " | ".join([*cells, "", "", "", CHANGE_TEXT["removed"]]) + " |"


def latency_chart(results: RunResults, comparison: Comparison | None) -> str:
    """A Mermaid bar chart of p95 per scenario, slowest ten; the baseline as a line."""
    slowest = []
    for scenario in results.scenarios:
        m = scenario_metrics(scenario)
        if m.latency is not None:
            slowest.append((m.latency.p95, scenario))
    if not slowest:
        return ""
    slowest.sort(key=lambda pair: -pair[0])
    slowest = slowest[:CHART_SCENARIOS]
    labels = ", ".join(_chart_label(s.label) for _, s in slowest)
    now = [round(p95) for p95, _ in slowest]
    lines = ["```mermaid", "xychart-beta"]
    before: list[int] = []
    if comparison is not None:
        for _, scenario in slowest:
            change = comparison.change_for(scenario.scenario_id)
            delta = change.latency_p95 if change else None
            before.append(round(delta.before) if delta and delta.before is not None else 0)
        lines.append('    title "p95 turn latency in ms: bars this run, line the baseline"')
    else:
        lines.append('    title "p95 turn latency in ms, slowest scenarios"')
    top = max(now + before) or 1
    lines += [f"    x-axis [{labels}]", f'    y-axis "ms" 0 --> {round(top * 1.1) + 1}']
    lines.append(f"    bar [{', '.join(map(str, now))}]")
    if before:
        lines.append(f"    line [{', '.join(map(str, before))}]")
    lines.append("```")
    return "\n".join(lines)


def _chart_label(label: str) -> str:
    # Inside a fenced block Markdown is inert; only quotes and backticks could break it.
    clean = "".join(c for c in plain(label) if c not in '"`\\[]').strip() or "?"
    return '"' + one_line(clean, 24) + '"'
