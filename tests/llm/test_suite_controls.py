"""The judge preflight uses the suite's own known-bad controls where a calibration is in force:
a judge that recognises the built-in canaries (and fails only them) passes the preflight on its
canaries alone, and is stopped once the suite's conversations take their places."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from lkeval.llm.canaries import KNOWN_FAILS
from lkeval.llm.config import LLMEndpointOptions, LLMOptions, LLMSpec, resolve_llm_spec
from lkeval.llm.preflight import WeakJudgeError, preflight_judge
from lkeval.results.controls import paired_control, suite_controls
from lkeval.results.model import Attempt, TranscriptItem
from lkeval.scenarios.model import Scenario
from lkeval.testing.llm_server import LLMServer
from tests.report_fixtures import msg, results_of, scenario

# the built-in canaries' own refusals: a judge that knows them games the preflight
CANARY_REFUSALS = "|".join(
    ("Please call another shop", "Please write to us instead", "Bookings are closed",
     "Check the website", "Call the front desk", "Please visit a branch")
)  # fmt: skip

CONVERSATION = (
    msg(0, "assistant", "Hotel Example, how can I help?"),
    msg(1, "user", "Please book a double room for Ada, two nights."),
    TranscriptItem(kind="function_call", turn=1, name="book_room", arguments="{}"),
    TranscriptItem(kind="function_call_output", turn=1, output="booked"),
    msg(1, "assistant", "All set: a double room for Ada, two nights."),
)


def _verdict(value: str, **match: Any) -> dict[str, Any]:
    args = {"reasoning": value, "verdict": value}
    return {**match, "tool_calls": [{"name": "submit_verdict", "arguments": args}]}


def _spec(server: LLMServer) -> LLMSpec:
    flags = LLMOptions(judge=LLMEndpointOptions(model="judge", base_url=server.base_url))
    return replace(resolve_llm_spec("judge", flags, environ={}), retry_delay=0.01, max_retries=0)


def _scenario() -> Scenario:
    return Scenario(
        label="Books a room",
        instructions="You are Ada. Book a double room for two nights.",
        agent_expectations="The agent books a double room for Ada for two nights.",
        file="s.yaml",
        line=1,
        group_id="g",
        group_name="G",
        id="SCN_book",
        id_derived=False,
    )


def test_the_suites_controls_come_from_calibrated_passing_conversations() -> None:
    current = _scenario()
    baseline = results_of(
        scenario("Books a room", scenario_id="SCN_book", attempts=(
            Attempt("failed", transcript=CONVERSATION[:2]),
            Attempt("passed", transcript=CONVERSATION),
        )),
    )  # fmt: skip
    (control,) = suite_controls(baseline, [current], {"SCN_book": (current.digest, None)}, 6)
    assert control == (paired_control(CONVERSATION), current.agent_expectations,
                       current.instructions)  # fmt: skip
    # a calibration of other content, or none, gives nothing
    assert suite_controls(baseline, [current], {"SCN_book": ("old", None)}, 6) == ()
    assert suite_controls(baseline, [current], {}, 6) == ()


def test_a_judge_that_knows_the_canaries_is_stopped_by_the_suites_own_controls() -> None:
    rules = [_verdict("fail", last_user=CANARY_REFUSALS), _verdict("pass")]
    current = _scenario()
    control = (paired_control(CONVERSATION), current.agent_expectations, current.instructions)
    with LLMServer(rules) as server:
        fooled = preflight_judge(_spec(server), environ={})  # the built-in canaries alone
        assert not fooled.weak
        with pytest.raises(WeakJudgeError, match="passed the known-bad canary transcripts"):
            preflight_judge(_spec(server), environ={}, suite_controls=[control])
        # one control of the suite fills half of each round: the judge passed those
        ours = [
            r
            for r in server.requests
            if "double room for Ada, two nights" in str(r.body["messages"])
        ]
    assert len(ours) >= len(KNOWN_FAILS) // 2
