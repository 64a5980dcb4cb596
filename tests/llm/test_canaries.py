"""The judge preflight's known-bad canaries and their sequential test: the figures stated in
``lkeval/llm/canaries.py`` (exact), and a one-sided judge on the local LLM server stopped where
the old five asks of one canary let it through."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from functools import cache
from typing import Any

import pytest

from lkeval.llm.canaries import (
    KNOWN_FAILS,
    MAX_ASKS,
    ROUND,
    expected_asks,
    stop_probability,
    verdict,
)
from lkeval.llm.config import LLMEndpointOptions, LLMOptions, LLMSpec, resolve_llm_spec
from lkeval.llm.preflight import WeakJudgeError, _ask_known_fails, preflight_judge
from lkeval.testing.llm_server import LLMServer

REFUSAL = "I can't help with that"


def _independent(p: float) -> tuple[float, float]:
    """(P(weak), expected asks) walking every ask one at a time (not a round's binomial)."""

    @cache
    def go(passes: int, asks: int) -> tuple[float, float]:
        if (asks and asks % ROUND == 0) or asks == MAX_ASKS:
            decided = verdict(passes, asks)
            if decided:
                return float(decided == "weak"), 0.0
        weak_pass, cost_pass = go(passes + 1, asks + 1)
        weak_fail, cost_fail = go(passes, asks + 1)
        return p * weak_pass + (1 - p) * weak_fail, 1 + p * cost_pass + (1 - p) * cost_fail

    return go(0, 0)


@pytest.mark.parametrize("p", [0.0, 0.1, 0.2, 0.3, 0.5, 1.0])
def test_the_programme_agrees_with_walking_every_ask(p: float) -> None:
    weak, asks = _independent(p)
    assert stop_probability(p) == pytest.approx(weak, abs=1e-12)
    assert expected_asks(p) == pytest.approx(asks, abs=1e-9)


def test_the_figures_stated_in_the_docstring() -> None:
    assert len(KNOWN_FAILS) == ROUND == 6 and MAX_ASKS == 78
    assert len({t for t, _, _ in KNOWN_FAILS}) == 6  # six distinct conversations
    assert stop_probability(0.3) >= 0.95 and round(stop_probability(0.3), 4) == 0.9508
    assert stop_probability(0.1) <= 0.01 and round(stop_probability(0.1), 4) == 0.0091
    assert stop_probability(1.0) == 1.0 and stop_probability(0.0) == 0.0
    assert (expected_asks(0.0), expected_asks(1.0)) == (12.0, 6.0)
    assert round(expected_asks(0.1), 1) == 26.9 and round(expected_asks(0.3), 1) == 30.7


def test_the_asking_loop_stops_where_the_test_says() -> None:
    def scripted(answers: list[str]) -> list[Any]:
        async def ask() -> str:
            return answers.pop(0)

        return [ask] * ROUND

    fit = asyncio.run(_ask_known_fails(scripted(["fail"] * MAX_ASKS), maybe_is_pass=False))
    assert (len(fit.votes), fit.passed) == (12, False)
    weak = asyncio.run(_ask_known_fails(scripted(["pass"] * MAX_ASKS), maybe_is_pass=False))
    assert (len(weak.votes), weak.passed) == (6, True)
    # 3 passes in every 10 answers: weak once the evidence reaches the bound
    one_sided = (["pass"] * 3 + ["fail"] * 7) * 8
    caught = asyncio.run(_ask_known_fails(scripted(one_sided), maybe_is_pass=False))
    assert caught.passed and len(caught.votes) < MAX_ASKS


def _verdict(value: str, **match: Any) -> dict[str, Any]:
    args = {"reasoning": value, "verdict": value}
    return {**match, "tool_calls": [{"name": "submit_verdict", "arguments": args}]}


def _spec(server: LLMServer) -> LLMSpec:
    flags = LLMOptions(judge=LLMEndpointOptions(model="judge", base_url=server.base_url))
    return replace(resolve_llm_spec("judge", flags, environ={}), retry_delay=0.01, max_retries=0)


@pytest.mark.parametrize("seed", range(4))
def test_a_one_sided_judge_is_stopped_by_the_preflight(seed: int) -> None:
    """It passes known-bad conversations 30% of the time (3 of every 10, at seeded places)
    and is right otherwise; the old preflight (one canary, majority of 5) let it through."""
    quirks = {"noisy_verdicts": {"fraction": 0.3, "seed": seed, "exact": True, "only": "fail"}}
    rules = [_verdict("fail", last_user=REFUSAL), _verdict("pass")]
    with LLMServer(rules, quirks=quirks) as server:
        with pytest.raises(WeakJudgeError) as info:
            preflight_judge(_spec(server), environ={})
        bad = [r for r in server.requests if REFUSAL in r.body["messages"][-1]["content"]]
    assert "passed the known-bad canary transcripts" in str(info.value)
    assert ROUND < len(bad) <= MAX_ASKS


def test_a_judge_right_on_every_canary_costs_two_rounds() -> None:
    rules = [_verdict("fail", last_user=REFUSAL), _verdict("pass")]
    with LLMServer(rules) as server:
        check = preflight_judge(_spec(server), environ={})
    assert not check.weak and check.known_fail_votes == ("fail",) * 12
