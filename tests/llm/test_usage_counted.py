"""Budgets count what was spent: every judge call's tokens, and "unpriced" where they are unknown.

A llama.cpp judge's stream used to be closed at the verdict's closing brace, before the usage
chunk, so results recorded its input tokens as 0 while the server counted 564-732, and
``--max-cost`` undercounted. Against the scripted server with llama.cpp's quirks, over HTTP.
"""

from __future__ import annotations

import json

from report_fixtures import results_of, scenario
from test_judge import LLAMA_JUDGE, judge, spec_for, verdict_rule

from lkeval.results.gate import evaluate_gate
from lkeval.results.metrics import Budgets
from lkeval.results.model import Attempt, Usage
from lkeval.results.pricing import PriceTable, format_cost, table_price, total_cost
from lkeval.testing import llm_wire
from lkeval.testing.llm_server import LLMServer


def test_the_json_schema_verdict_is_read_to_the_usage_chunk_and_counts_the_servers_tokens() -> None:
    with LLMServer(LLAMA_JUDGE, quirks={"like": "llama-server"}) as server:
        spec = spec_for(server, verdict_form="json_schema", price_in=1.0, price_out=2.0)
        verdict, usage = judge(spec)
        body = server.requests[0].body
    assert verdict.verdict == "fail"
    served = llm_wire.tokens(json.dumps(body["messages"]))  # what the server counted
    assert usage.input_tokens == served > 0
    assert usage.unreported == 0
    assert usage.cost_usd == (usage.input_tokens * 1.0 + usage.output_tokens * 2.0) / 1e6


def test_a_call_closed_before_its_usage_chunk_is_unreported_and_never_priced_as_zero() -> None:
    """The tool form on llama.cpp pads to the cap: reading stops, the usage never comes."""
    with LLMServer(LLAMA_JUDGE, quirks={"like": "llama-server"}) as server:
        verdict, usage = judge(spec_for(server, price_in=1.0, price_out=2.0))
    assert verdict.verdict == "fail"
    assert usage.unreported == 1 and 0 < usage.output_tokens < 100  # the padding was not read
    assert usage.cost_usd is None  # a price is known, the tokens are not: unknown, not $0
    cost, unpriced = total_cost({"judge": usage})
    assert cost is None
    assert unpriced == ("1 call(s) whose usage the server did not report",)


def test_a_server_that_sends_no_usage_leaves_the_calls_cost_unknown_not_zero() -> None:
    with LLMServer([verdict_rule("pass")], quirks={"usage": "omit"}) as server:
        _, usage = judge(spec_for(server, price_in=1.0, price_out=2.0))
    assert usage.unreported == 1 and usage.input_tokens == 0
    assert usage.cost_usd is None
    assert total_cost({"judge": usage}) == (
        None,
        ("1 call(s) whose usage the server did not report",),
    )


def test_max_cost_cannot_pass_on_a_sum_that_leaves_out_unreported_calls() -> None:
    counted = Usage(100, 10, 0.5, ("gpt-4.1-mini",))
    lost = Usage(0, 12, None, ("gpt-4.1-mini",), unreported=1)
    attempt = Attempt("passed", usage={"judge": counted + lost})
    run = results_of(scenario("A", attempts=(attempt,)))
    gate = evaluate_gate(run, None, budgets=Budgets(max_cost_usd=10.0))
    assert not gate.passed
    assert "cannot be checked" in gate.reasons[0]
    assert "1 call(s) whose usage the server did not report" in gate.reasons[0]
    assert format_cost(*total_cost({"judge": counted})) == "$0.5000"


def test_a_model_the_price_table_lists_at_zero_is_unpriced_unless_the_user_says_so() -> None:
    """LiveKit Inference's google/gemma-4-31b-it showed $0.0000 (a free tier's price)."""
    assert table_price("google/gemma-4-31b-it") is None
    usage = PriceTable().usage("google/gemma-4-31b-it", 1000, 100)
    assert usage.cost_usd is None and usage.unpriced == ("google/gemma-4-31b-it",)
    free = PriceTable({"google/gemma-4-31b-it": (0.0, 0.0)})
    assert free.usage("google/gemma-4-31b-it", 1000, 100).cost_usd == 0.0
    assert table_price("openai/gpt-4.1-mini") == (0.4, 1.6)
