"""Golden Markdown reports for the runs a reviewer meets: empty, all green, regressions with
budgets against a baseline, a 300-scenario run at the comment limit, an interrupted run."""

from __future__ import annotations

import html
from dataclasses import replace

from report_fixtures import assert_golden, metadata, msg

from lkeval.publish.github.comments import MAX_COMMENT_CHARS
from lkeval.reporters import MarkdownReporter, build_report
from lkeval.results.baseline import compare
from lkeval.results.gate import evaluate_gate
from lkeval.results.metrics import Budgets
from lkeval.results.model import (
    Attempt,
    ExpectationResult,
    RunResults,
    ScenarioResult,
    TranscriptItem,
    TurnMetrics,
    Usage,
    Verdict,
)
from lkeval.results.pricing import PriceTable

RUN_URL = "https://github.com/acme/hotel/actions/runs/42"
COMMENT_BUDGET = MAX_COMMENT_CHARS - 1024
PRICES = PriceTable()


def _usage(turns: int) -> dict[str, Usage]:
    return {
        "agent": PRICES.usage("gpt-4.1-mini", 900 * turns, 60 * turns),
        "caller": PRICES.usage("gpt-4.1-nano", 500 * turns, 30 * turns),
        "judge": PRICES.usage("my-local-judge", 1200, 80),
    }


def _scenario(
    n: int,
    status: str = "passed",
    latency: float = 400.0,
    turns: int = 4,
    reason: str = "",
    **kw: object,
) -> ScenarioResult:
    label = f"Booking case {n:03d}"
    transcript: tuple[TranscriptItem, ...] = (
        TranscriptItem("agent_handoff", 0, new_agent="FrontDesk"),
        msg(0, "assistant", "Welcome to the Grand Hotel."),
    )
    for t in range(1, turns + 1):
        transcript += (msg(t, "user", f"question {t}"), msg(t, "assistant", f"answer {t}"))
    metrics = tuple(
        TurnMetrics(t, latency_ms=latency + 10 * t, llm_ttft_ms=latency / 4, llm_tps=40.0)
        for t in range(1, turns + 1)
    )
    verdicts: tuple[Verdict, ...] = (Verdict("judge", "pass", "ok"),)
    expectations: tuple[ExpectationResult, ...] = ()
    if status == "failed":
        verdicts = (Verdict("judge", "fail", reason or "the agent never confirmed the dates"),)
        expectations = (
            ExpectationResult(2, 0, "function_call book_room", False, "not called", line=40 + n),
        )
    attempt = Attempt(
        status=status,  # type: ignore[arg-type]
        transcript=transcript,
        expectations=expectations,
        verdicts=verdicts,
        turns=metrics,
        usage=_usage(turns),
        agent_check="passed (no veto)",
        duration_seconds=2.0,
    )
    values: dict[str, object] = {
        "scenario_id": f"SCN_{n:03d}",
        "label": label,
        "group_id": "SCNG_booking",
        "group_name": "Room booking",
        "file": "evals/booking.yaml",
        "line": 10 + n,
        "status": status,
        "attempts": (attempt,),
        "duration_seconds": 2.0,
    }
    values.update(kw)
    return ScenarioResult(**values)  # type: ignore[arg-type]


def _run(*scenarios: ScenarioResult, **meta: object) -> RunResults:
    return RunResults(metadata=metadata(**meta), scenarios=scenarios)


def _render(
    results: RunResults,
    baseline: RunResults | None = None,
    budgets: Budgets | None = None,
    max_chars: int | None = None,
) -> str:
    comparison = compare(results, baseline) if baseline is not None else None
    gate = evaluate_gate(results, comparison, "any", None, budgets)
    report = build_report(results, comparison, gate, run_url=RUN_URL, max_chars=max_chars)
    return MarkdownReporter().format(report)


def test_empty_run() -> None:
    """An empty shard: the only results without a scenario that pass (issue 18 item 2)."""
    assert not evaluate_gate(_run(), None).passed
    out = _render(_run(shard="3/3", empty_shard=True))
    assert out.startswith("## lk-eval: ✅ gate passed — empty shard 3/3\n")
    assert "**0 scenarios:**" in out
    assert_golden("markdown-empty.md", out)


def test_all_pass() -> None:
    out = _render(_run(_scenario(1), _scenario(2, latency=900.0), _scenario(3, turns=1)))
    assert out.startswith("## lk-eval: ✅ gate passed — all 3 scenarios passed\n")
    assert "▶ session starts with agent FrontDesk" not in out  # no transcripts when green
    assert "**Latency:**" in out and "my-local-judge (unpriced)" in out
    assert "xychart-beta" in out
    assert_golden("markdown-all-pass.md", out)


def test_regressions_with_budgets() -> None:
    baseline = _run(
        _scenario(1),
        _scenario(2),
        _scenario(3, "failed"),
        _scenario(4, latency=300.0, turns=6),
        git_sha="fedcba9876543210fedcba9876543210fedcba98",
    )
    current = _run(
        _scenario(1),
        _scenario(2, "failed", reason="the agent booked the wrong night"),
        _scenario(3),
        _scenario(4, latency=900.0, turns=6, latency_budget={"p95": 800.0}),
        _scenario(5, "failed"),
    )
    budgets = Budgets(latency={"p95": 1500.0}, max_cost_usd=0.001, latency_regression=0.2)
    out = _render(current, baseline, budgets)
    first = out.splitlines()[0]
    assert first.startswith("## lk-eval: ❌ gate failed — 2 scenarios failed or errored")
    assert "budgets missed" in first
    order = [out.index(h) for h in ("### 🔻 Regressions (1)", "### ❌ New failures (1)")]
    order += [out.index(h) for h in ("### ⏱️ Budget misses", "### 🟢 Fixed (1)", "**vs baseline")]
    assert order == sorted(order)
    assert "pass rate 75% → 60% (−15)" in out
    assert "Booking case 004: p95" in out and "▶ session starts with agent FrontDesk" in out
    # as GitHub shows it (Markdown punctuation in text is sent as entities)
    assert "agent's own check (on_simulation_end): passed (no veto)" in html.unescape(out)
    assert "(line 42)" in out  # the failing expectation's YAML line
    assert_golden("markdown-regressions-budgets.md", out)


def test_huge_run_at_the_comment_limit_lists_every_failures_reason() -> None:
    scenarios = []
    for n in range(300):
        if n % 3 == 0 or n in (1, 2):  # 102 failures, as in the issue
            reason = f"case {n}: the agent quoted the wrong rate " + "and apologised " * 6
            scenarios.append(_scenario(n, "failed", turns=8, reason=reason))
        else:
            scenarios.append(_scenario(n, turns=8))
    out = _render(_run(*scenarios), max_chars=COMMENT_BUDGET)
    assert len(out) <= COMMENT_BUDGET
    failing = [s for s in scenarios if s.status == "failed"]
    assert len(failing) == 102
    for s in failing:
        assert f"case {int(s.scenario_id[4:])}: the agent quoted the wrong rate" in out
    assert "left out to fit" in out and "more failure" not in out
    assert_golden("markdown-huge-300.md", out)


def test_interrupted_run() -> None:
    partial = _run(
        _scenario(1),
        replace(
            _scenario(2, "error"),
            reason="interrupted",
            attempts=(Attempt(status="error", reason="interrupted"),),
        ),
        interrupted=True,
    )
    out = _render(partial)
    assert "> ⚠️ **The run was interrupted:**" in out.splitlines()[2]
    assert "agent's own check (on_simulation_end): did not run" in html.unescape(out)
    assert_golden("markdown-interrupted.md", out)
