"""Turn metrics from the wire, percentiles, prices (genai-prices and overrides), unpriced models."""

from __future__ import annotations

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from livekit.protocol.agent_pb import agent_session as pb

from lkeval.results.metrics import format_ms, percentile, spread, summarize
from lkeval.results.model import TurnMetrics, Usage
from lkeval.results.pricing import PriceTable, format_cost, parse_price_override, total_cost
from lkeval.run.turn_metrics import measure_turn


def _stamp(seconds: float) -> Timestamp:
    return Timestamp(seconds=int(seconds), nanos=round((seconds % 1) * 1e9))


def _items() -> list[pb.ChatContext.ChatItem]:
    call = pb.FunctionCall(call_id="c1", name="lookup", arguments="{}", created_at=_stamp(10.0))
    out = pb.FunctionCallOutput(call_id="c1", name="lookup", output="ok", created_at=_stamp(10.25))
    first = pb.ChatMessage(
        role=pb.ASSISTANT,
        metrics=pb.MetricsReport(llm_node_ttft=0.12, llm_node_tps=48.5, llm_node_ttfs=0.2),
    )
    second = pb.ChatMessage(role=pb.ASSISTANT, metrics=pb.MetricsReport(llm_node_ttft=0.9))
    return [
        pb.ChatContext.ChatItem(message=pb.ChatMessage(role=pb.USER)),
        pb.ChatContext.ChatItem(function_call=call),
        pb.ChatContext.ChatItem(function_call_output=out),
        pb.ChatContext.ChatItem(message=first),
        pb.ChatContext.ChatItem(message=second),
    ]


def test_a_turn_keeps_the_agents_own_metrics_under_livekits_simulation_names() -> None:
    measured = measure_turn(3, 0.5, _items())
    assert measured == TurnMetrics(
        turn=3,
        latency_ms=500.0,
        llm_ttft_ms=120.0,
        llm_ttfs_ms=200.0,
        llm_tps=48.5,
        tool_ms=(250.0,),
    )


def test_a_turn_without_reported_metrics_has_only_lk_evals_clock() -> None:
    bare = [pb.ChatContext.ChatItem(message=pb.ChatMessage(role=pb.ASSISTANT))]
    assert measure_turn(1, 0.02, bare) == TurnMetrics(turn=1, latency_ms=20.0)


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50 and percentile(values, 95) == 95
    assert percentile([3.0, 1.0, 2.0], 95) == 3.0
    assert spread([None, None]) is None
    got = spread([1.0, None, 9.0])
    assert got is not None and (got.p50, got.max, got.n) == (1.0, 9.0, 2)


def test_a_summary_pools_turns_and_prices_per_party() -> None:
    turns = [TurnMetrics(i, latency_ms=100.0 * i, llm_ttft_ms=10.0 * i) for i in range(1, 21)]
    usage = {
        "agent": PriceTable().usage("gpt-4.1-mini", 1_000_000, 0),
        "judge": Usage(10, 10, None, ("scripted",), ("scripted",)),
    }
    metrics = summarize(turns, usage)
    assert metrics.turns == 20
    assert metrics.latency is not None and metrics.latency.p95 == 1900.0
    assert metrics.ttft is not None and metrics.ttft.p50 == 100.0
    assert metrics.cost_usd == pytest.approx(0.4)
    assert metrics.unpriced == ("scripted",)
    assert format_cost(metrics.cost_usd, metrics.unpriced) == "$0.4000 + unpriced (scripted)"


def test_unknown_models_are_unpriced_never_zero() -> None:
    usage = PriceTable().usage("my-finetune-7b", 1000, 1000)
    assert usage.cost_usd is None and usage.unpriced == ("my-finetune-7b",)
    assert format_cost(*total_cost({"agent": usage})) == "unpriced"
    # a results file written before model names: tokens without a price are still unpriced
    assert total_cost({"caller": Usage(5, 5)}) == (None, ("unknown model",))


def test_the_maintained_table_and_overrides() -> None:
    table = PriceTable()
    assert table.price("gpt-4.1-mini") == (0.4, 1.6)
    assert table.price("openai/gpt-4.1-mini") == (0.4, 1.6)  # LiveKit Inference style
    custom = PriceTable({"gpt-4.1-mini": (1.0, 2.0), "local": (0.0, 0.0)})
    assert custom.price("openai/gpt-4.1-mini") == (1.0, 2.0)
    assert custom.usage("local", 100, 100).cost_usd == 0.0  # an explicit 0 is a price


@pytest.mark.parametrize("text", ["gpt-4.1", "=1,2", "m=1", "m=a,b", "m=1,2,3", "m=-1,2"])
def test_bad_price_overrides_say_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match=r"MODEL=IN,OUT|negative"):
        parse_price_override(text)
    assert parse_price_override(" m = 1 , 2") == ("m", (1.0, 2.0))


def test_milliseconds_read_as_people_say_them() -> None:
    assert format_ms(840.4) == "840 ms" and format_ms(1310) == "1.31 s" and format_ms(None) == "–"


def test_price_overrides_reach_the_caller_and_judge_and_typos_are_usage_errors() -> None:
    import argparse

    from conftest import clean_env, run_lkeval

    from lkeval.cli.flags import add_llm_arguments
    from lkeval.cli.options import llm_options
    from lkeval.llm.config import resolve_llm_spec

    parser = argparse.ArgumentParser()
    add_llm_arguments(parser)
    env = {"OPENAI_API_KEY": "x"}
    args = parser.parse_args(["--price", "gpt-4.1-mini=1,2", "--judge-model", "gpt-4.1-mini"])
    spec = resolve_llm_spec("judge", llm_options(args), env)
    assert (spec.price_in, spec.price_out) == (1.0, 2.0)
    listed = resolve_llm_spec(
        "judge", llm_options(parser.parse_args(["--judge-model", "gpt-4o"])), env
    )
    assert (listed.price_in, listed.price_out) == (2.5, 10.0)  # from genai-prices
    bad = run_lkeval(
        ["run", "--agent", "a.py", "--scenarios", "s.yaml", "--price", "x=1"], clean_env()
    )
    assert bad.returncode == 2 and "--price" in bad.stderr and "MODEL=IN,OUT" in bad.stderr


def test_results_json_carries_the_figures_the_reports_show() -> None:
    import json

    from report_fixtures import results_of, scenario

    from lkeval.results.model import Attempt
    from lkeval.results.results_json import dump_results, results_from_dict

    turns = tuple(
        TurnMetrics(turn=i, latency_ms=ms, llm_ttft_ms=ms / 4)
        for i, ms in enumerate([100.0, 400.0, 200.0, 900.0], start=1)
    )
    priced = Usage(10, 5, cost_usd=0.002, models=("gpt-x",))
    timed = scenario("a", attempts=(Attempt("passed", turns=turns, usage={"agent": priced}),))
    results = results_of(timed, scenario("b", "error"))
    raw = json.loads(dump_results(results))
    first = raw["scenarios"][0]
    assert first["figures"] == {
        "turns": 4,
        "latency_ms": {"p50": 200.0, "p95": 900.0, "max": 900.0, "n": 4},
        "ttft_ms": {"p50": 50.0, "p95": 225.0, "max": 225.0, "n": 4},
        "first_audio_ms": None,  # text turns: no audio figures
        "e2e_latency_ms": None,
        "tool_ms": None,
        "cost_usd": 0.002,
        "unpriced": [],
    }
    assert list(first).index("figures") < list(first).index("attempts")
    assert raw["scenarios"][1]["figures"]["latency_ms"] is None  # nothing measured: null, not 0
    assert raw["figures"]["latency_ms"]["max"] == 900.0 and raw["figures"]["turns"] == 4
    # Derived data: a hand-edited figure is ignored on loading (reports recompute from turns).
    first["figures"]["latency_ms"]["p95"] = 1.0
    assert results_from_dict(raw) == results


def test_a_baseline_measured_at_another_inference_class_is_named() -> None:
    from dataclasses import replace

    from report_fixtures import results_of, scenario

    from lkeval.results.baseline import compare
    from lkeval.results.model import RunResults

    def at(inference_class: str) -> RunResults:
        results = results_of(scenario("a"))
        return replace(results, metadata=replace(results.metadata, inference_class=inference_class))

    (change,) = compare(at("agent"), at("low")).model_changes
    assert change.startswith("LiveKit Inference class changed since the baseline: low → agent")
    assert compare(at("low"), at("low")).model_changes == ()
    assert compare(at("low"), at("")).model_changes == ()  # an older baseline recorded none
