"""Audio turns' figures: the caller's wait (first audio) and its budget, labelled with the
conditions they were measured under; an overloaded machine is said beside every latency miss."""

from __future__ import annotations

import dataclasses

from report_fixtures import results_of, scenario

from lkeval.reporters.markdown_parts import metrics_lines
from lkeval.results.metrics import Budgets, check_budgets, latency_conditions, suite_metrics
from lkeval.results.model import Attempt, TurnMetrics
from lkeval.scenarios.latency import parse_latency_flag


def _audio_run(load: float, cores: int = 2):  # type: ignore[no-untyped-def]
    turns = tuple(
        TurnMetrics(
            turn=i, latency_ms=ms, first_audio_ms=ms, e2e_latency_ms=ms + 200, mode="audio",
            load=load,
        )
        for i, ms in enumerate([1200.0, 1500.0, 2400.0], start=1)
    )  # fmt: skip
    results = results_of(scenario("a", attempts=(Attempt("passed", turns=turns),)))
    meta = dataclasses.replace(
        results.metadata,
        conversation_mode="audio",
        speech="caller voice espeak; oracle STT: recognition not tested",
        max_load=load,
        cores=cores,
        concurrency=2,
    )
    return dataclasses.replace(results, metadata=meta)


def test_first_audio_budget_as_the_issue_writes_it() -> None:
    budget = parse_latency_flag("first_audio.p95=1.5s")
    assert budget == {"first_audio_p95": 1500.0}
    (miss,) = check_budgets(_audio_run(load=0.5), Budgets(latency=budget))
    assert miss.text == "suite first audio p95 2.40 s is over the budget 1.50 s"
    assert check_budgets(_audio_run(0.5), Budgets(latency={"first_audio_p95": 3000.0})) == ()


def test_a_first_audio_budget_on_a_text_run_cannot_pass() -> None:
    text_turns = (TurnMetrics(turn=1, latency_ms=100.0),)
    results = results_of(scenario("a", attempts=(Attempt("passed", turns=text_turns),)))
    (miss,) = check_budgets(results, Budgets(latency={"first_audio_p95": 3000.0}))
    assert "cannot be checked: no audio turn heard the agent" in miss.text


def test_figures_say_the_load_and_an_overloaded_machine_is_said_with_every_miss() -> None:
    quiet, busy = _audio_run(load=1.2), _audio_run(load=5.0)
    assert "load up to 1.2 on 2 cores, concurrency 2" in latency_conditions(quiet.metadata)
    assert "recognition not tested" in latency_conditions(quiet.metadata)
    assert "exceeded its cores" not in latency_conditions(quiet.metadata)
    assert "exceeded its cores" in latency_conditions(busy.metadata)
    (miss,) = check_budgets(busy, Budgets(latency={"first_audio_p95": 1000.0}))
    assert miss.text.endswith("(timed while the machine's load exceeded its cores)")
    suite = suite_metrics(quiet)
    assert suite.first_audio is not None and suite.first_audio.max == 2400.0
    assert suite.e2e is not None and suite.e2e.max == 2600.0
    (line, *_) = metrics_lines(quiet)
    assert "first audio p50 1.50 s" in line and "agent e2e_latency" in line


def test_an_audio_run_against_a_text_baseline_is_named_and_its_latency_never_gated() -> None:
    from lkeval.results.baseline import compare
    from lkeval.results.regression_budgets import regression_misses

    def run(mode: str, ms: float):  # type: ignore[no-untyped-def]
        turns = tuple(TurnMetrics(turn=i, latency_ms=ms, mode=mode) for i in range(1, 7))
        results = results_of(scenario("a", attempts=(Attempt("passed", turns=turns),)))
        return dataclasses.replace(
            results, metadata=dataclasses.replace(results.metadata, conversation_mode=mode)
        )

    budgets = Budgets(latency_regression=0.2)
    across = compare(run("audio", 3000.0), run("text", 300.0))
    assert any("conversation mode changed since the baseline: text → audio" in c
               for c in across.model_changes)  # fmt: skip
    assert not across.latency_comparable
    assert regression_misses(run("audio", 3000.0), across, budgets) == []
    same = compare(run("audio", 3000.0), run("audio", 300.0))
    assert same.latency_comparable and same.model_changes == ()
    assert regression_misses(run("audio", 3000.0), same, budgets)  # a real regression still is
