"""Latency and cost budgets: parsing, the baseline's metric deltas and noise rule, the gate."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import clean_env, run_lkeval
from report_fixtures import results_of, scenario, verdicts_for, write_results

from lkeval.publish.github.budgets import budget_annotations, metric_outputs
from lkeval.results.baseline import compare
from lkeval.results.gate import evaluate_gate
from lkeval.results.metrics import Budgets
from lkeval.results.model import Attempt, ScenarioResult, TurnMetrics, Usage
from lkeval.scenarios.latency import parse_latency_flag
from lkeval.scenarios.loader import ScenarioFileError, load_or_raise


def timed(
    label: str, latencies: list[float], cost: float | None = 0.01, **kw: object
) -> ScenarioResult:
    """A passed scenario whose turns took ``latencies`` ms (TTFT a tenth of each)."""
    turns = tuple(
        TurnMetrics(i + 1, latency_ms=ms, llm_ttft_ms=ms / 10) for i, ms in enumerate(latencies)
    )
    unpriced = ("mystery-llm",) if cost is None else ()
    usage = {"agent": Usage(1000, 100, cost, ("gpt-4.1-mini",), unpriced)}
    attempt = Attempt(status="passed", turns=turns, usage=usage, verdicts=verdicts_for("passed"))
    return scenario(label, attempts=(attempt,), **kw)


STEADY = [100.0, 110, 105, 120, 115, 108]


def test_latency_flags_and_yaml_parse_units_and_refuse_bare_numbers() -> None:
    assert parse_latency_flag("p95=1.5s") == {"p95": 1500.0}
    assert parse_latency_flag("p95=1200ms, ttft_p95=600ms") == {"p95": 1200.0, "ttft_p95": 600.0}
    for bad in ("p95=1.5", "p99=1s", "1.5s", "p95=fast"):
        with pytest.raises(ValueError):
            parse_latency_flag(bad)


def test_a_scenarios_latency_budget_loads_and_each_mistake_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            name: G
            scenarios:
              - label: ok
                instructions: hi
                latency: {p95: 1200ms, ttft_p95: 0.6s}
              - label: bad
                instructions: hi
                latency:
                  p99: 1s
                  p95: 1200
            """
        )
    )
    with pytest.raises(ScenarioFileError) as info:
        load_or_raise([path])
    text = str(info.value)
    assert "line 9" in text or ":9:" in text, text
    assert "p99" in text and "unknown latency statistic" in text
    assert "1200" in text and "with its unit" in text
    path.write_text(path.read_text().split("  - label: bad")[0])
    ((ok_group,), _) = load_or_raise([path])
    (ok,) = ok_group.scenarios
    assert ok.latency == {"p95": 1200.0, "ttft_p95": 600.0}


def test_suite_and_scenario_latency_budgets_are_their_own_gate_reasons() -> None:
    slow = timed("Slow one", [100, 2000, 2100, 90, 95], latency_budget={"p95": 1200.0})
    run = results_of(timed("Fast one", STEADY), slow)
    gate = evaluate_gate(run, None, budgets=Budgets(latency={"p95": 1500.0}))
    assert not gate.passed and gate.exit_code == 1
    assert [m.kind for m in gate.budget_misses] == ["latency", "latency"]
    assert gate.reasons == (
        "budget missed: suite turn latency p95 2.10 s is over the budget 1.50 s",
        "budget missed: Slow one: turn latency p95 2.10 s is over the budget 1.20 s",
    )
    (suite_line, scenario_line) = budget_annotations(gate, None)
    assert suite_line.startswith("::error title=lk-eval%3A latency budget::")
    assert scenario_line.startswith("::error file=evals/bulk.yaml,line=1,")
    never = evaluate_gate(run, None, "never", budgets=Budgets(latency={"p95": 1500.0}))
    assert never.passed and len(never.budget_misses) == 2
    assert budget_annotations(never, None)[0].startswith("::warning ")
    roomy = evaluate_gate(run, None, budgets=Budgets(latency={"p95": 2500.0}))
    assert [m.scenario_id for m in roomy.budget_misses] == ["SCN_Slow_one"]  # its own budget


def test_a_ttft_budget_on_an_agent_that_reports_no_ttft_is_a_miss_not_a_pass() -> None:
    bare = scenario(
        "Bare",
        attempts=(
            Attempt("passed", turns=(TurnMetrics(1, 50.0),), verdicts=verdicts_for("passed")),
        ),
    )
    gate = evaluate_gate(results_of(bare), None, budgets=Budgets(latency={"ttft_p95": 600.0}))
    assert not gate.passed
    assert "cannot be checked: the agent reported no TTFT" in gate.reasons[0]


def test_max_cost_fails_over_budget_and_when_a_model_is_unpriced() -> None:
    run = results_of(timed("A", STEADY, cost=1.5), timed("B", STEADY, cost=1.2))
    assert evaluate_gate(run, None, budgets=Budgets(max_cost_usd=3.0)).passed
    over = evaluate_gate(run, None, budgets=Budgets(max_cost_usd=2.5))
    assert over.reasons == ("budget missed: cost $2.70 is over the budget $2.50",)
    partial = results_of(timed("A", STEADY, cost=0.5), timed("B", STEADY, cost=None))
    unpriced = evaluate_gate(partial, None, budgets=Budgets(max_cost_usd=2.5))
    assert not unpriced.passed and "unpriced (mystery-llm)" in unpriced.reasons[0]
    assert "--price" in unpriced.reasons[0]


def test_the_baseline_diff_has_latency_and_cost_deltas_and_a_noise_rule() -> None:
    before = results_of(
        timed("Steady", STEADY, cost=0.10),
        timed("Short", [100.0, 100.0], cost=0.10),
        timed("Jittery", [100.0, 100, 100, 100, 100], cost=0.10),
    )
    after = results_of(
        timed("Steady", [v * 2 for v in STEADY], cost=0.15),
        timed("Short", [400.0, 400.0], cost=0.10),  # 4x, but two turns: never flagged
        timed("Jittery", [50.0, 50, 100, 120, 900], cost=0.10),  # within its own spread
    )
    comparison = compare(after, before)
    by_label = {c.label: c for c in comparison.changes}
    steady = by_label["Steady"].latency_p95
    assert steady is not None and steady.percent == pytest.approx(100.0) and not steady.noisy
    assert by_label["Short"].latency_p95 is not None and by_label["Short"].latency_p95.noisy
    assert by_label["Jittery"].latency_p95 is not None and by_label["Jittery"].latency_p95.noisy
    assert comparison.cost.before == pytest.approx(0.30) and comparison.cost.after == pytest.approx(
        0.35
    )
    assert comparison.pass_rate.before == comparison.pass_rate.after == 1.0

    budgets = Budgets(latency_regression=0.2, cost_regression=0.25)
    gate = evaluate_gate(after, comparison, budgets=budgets)
    assert not gate.passed
    texts = [m.text for m in gate.budget_misses]
    assert any(t.startswith("Steady: p95 120 ms → 240 ms (+100%)") for t in texts), texts
    assert not any("Short" in t or "Jittery" in t for t in texts)
    assert not any(m.kind == "cost_regression" for m in gate.budget_misses)  # +17%
    cheaper = evaluate_gate(after, comparison, budgets=Budgets(cost_regression=0.1))
    assert [m.kind for m in cheaper.budget_misses] == ["cost_regression"]
    assert "+17%" in cheaper.budget_misses[0].text

    outputs = metric_outputs(after, comparison, gate)
    assert outputs["cost-usd"] == "0.350000" and outputs["cost-delta-usd"] == "+0.050000"
    assert outputs["latency-p95-ms"] and outputs["latency-p95-delta-pct"].startswith("+")
    assert outputs["budget-misses"] == str(len(gate.budget_misses))


def test_budget_flags_reach_the_gate_and_typos_are_usage_errors(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    write_results(results_of(timed("A", [100, 2000, 2100, 90, 95])), results)
    base = ["report", "--results", str(results), "--no-github"]
    over = run_lkeval([*base, "--max-latency", "p95=1.5s"], clean_env())
    assert over.returncode == 1, over.stdout + over.stderr
    assert "budget missed: suite turn latency p95 2.10 s" in over.stdout
    assert run_lkeval([*base, "--max-latency", "p95=3s"], clean_env()).returncode == 0
    for flag, value in (
        ("--max-latency", "p95=1.5"),
        ("--max-cost", "lots"),
        ("--latency-regression", "-5%"),
    ):
        bad = run_lkeval([*base, flag, value], clean_env())
        assert bad.returncode == 2 and flag in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize(
    ("inference_class", "noted"), [("low", True), ("mixed", True), ("agent", False), ("", False)]
)
def test_every_latency_budget_miss_says_when_it_was_measured_at_the_low_class(
    inference_class: str, noted: bool
) -> None:
    from dataclasses import replace

    from lkeval.results.metrics import LOW_CLASS_NOTE

    results = results_of(timed("A", STEADY, latency_budget={"p95": 50.0}), timed("B", STEADY))
    results = replace(results, metadata=replace(results.metadata, inference_class=inference_class))
    budgets = Budgets(latency={"p50": 10.0}, max_cost_usd=0.001)
    gate = evaluate_gate(results, None, "any", None, budgets)
    kinds = sorted(m.kind for m in gate.budget_misses)
    assert kinds == ["cost", "latency", "latency"]
    for miss in gate.budget_misses:
        assert miss.text.endswith(f"({LOW_CLASS_NOTE})") == (noted and miss.kind == "latency")
    assert any(LOW_CLASS_NOTE in reason for reason in gate.reasons) == noted
