"""Scripted expectations against turn events: cursor semantics, partial arguments, reasons."""

from __future__ import annotations

import asyncio

from lkeval.results.model import TranscriptItem
from lkeval.run.expectations import agent_key, check_turn, partial_mismatch
from lkeval.scenarios.model import Expectation, Turn


def _turn(*expect: Expectation) -> Turn:
    return Turn(user="hi", expect=expect, line=1)


EVENTS = [
    TranscriptItem(kind="message", turn=1, role="user", text="Book a double for two nights"),
    TranscriptItem(
        kind="function_call",
        turn=1,
        name="check_availability",
        arguments='{"room_type": "double", "nights": 2}',
    ),
    TranscriptItem(
        kind="function_call_output",
        turn=1,
        name="check_availability",
        output="1 double room(s) free",
        is_error=False,
    ),
    TranscriptItem(kind="message", turn=1, role="assistant", text="Good news: one is free."),
    TranscriptItem(
        kind="agent_handoff", turn=1, old_agent="front_desk_agent", new_agent="booking_agent"
    ),
]


def run(turn: Turn, events: list[TranscriptItem] = EVENTS, judge=None):  # type: ignore[no-untyped-def]
    return asyncio.run(check_turn(1, turn, events, judge))


def test_sequence_passes_and_user_message_is_not_an_event() -> None:
    results = run(
        _turn(
            Expectation(
                "function_call", 1, name="check_availability", arguments={"room_type": "double"}
            ),
            Expectation("function_call_output", 2, is_error=False, output_contains="free"),
            Expectation("message", 3, contains=("good news",)),
            Expectation("handoff", 4, to="BookingAgent"),
            Expectation("no_more_events", 5),
        )
    )
    assert [r.passed for r in results] == [True] * 5, results


def test_wrong_arguments_fail_with_a_reason_naming_the_argument() -> None:
    (result,) = run(
        _turn(Expectation("function_call", 7, name="check_availability", arguments={"nights": 3}))
    )
    assert not result.passed
    assert "nights" in result.reason and "3" in result.reason
    assert result.line == 7


def test_skip_and_no_more_events_report_leftovers() -> None:
    results = run(_turn(Expectation("skip", 1, count=2), Expectation("no_more_events", 2)))
    assert results[0].passed
    assert not results[1].passed
    assert "Good news" in results[1].reason and "handoff" in results[1].reason


def test_contains_searches_without_moving_the_cursor() -> None:
    results = run(
        _turn(
            Expectation("handoff", 1, anywhere=True, to="booking_agent"),
            Expectation("function_call", 2, name="check_availability"),
            Expectation("message", 3, anywhere=True, matches=r"no rooms"),
        )
    )
    assert [r.passed for r in results] == [True, True, False]
    assert "no rooms" in results[2].reason


def test_out_of_events_and_wrong_kind() -> None:
    results = run(_turn(Expectation("message", 1)), events=[EVENTS[1]])
    assert not results[0].passed and "call check_availability" in results[0].reason
    results = run(
        _turn(Expectation("skip", 1, count=1), Expectation("message", 2)), events=[EVENTS[3]]
    )
    assert results[0].passed and not results[1].passed
    assert "no further event" in results[1].reason


def test_intent_uses_the_judge_and_reports_its_reason() -> None:
    seen = []

    async def judge(text: str, intent: str) -> tuple[bool, str]:
        seen.append((text, intent))
        return False, "it did not apologise"

    (result,) = run(
        _turn(Expectation("message", 1, anywhere=True, intent="apologises")), judge=judge
    )
    assert seen == [("Good news: one is free.", "apologises")]
    assert not result.passed and "did not apologise" in result.reason


def test_intent_without_a_judge_fails_clearly() -> None:
    (result,) = run(_turn(Expectation("message", 1, anywhere=True, intent="greets")))
    assert not result.passed and "--judge-model" in result.reason


def test_partial_mismatch_nested_and_case() -> None:
    assert partial_mismatch({"a": {"b": "X"}}, {"a": {"b": "x", "c": 1}, "d": 2}) == ""
    assert "a.b" in partial_mismatch({"a": {"b": 1}}, {"a": {"b": 2}})
    assert "missing" in partial_mismatch({"z": 1}, {"a": 1})


def test_agent_key_matches_class_names_and_ids() -> None:
    assert agent_key("BookingAgent") == agent_key("booking_agent") == "booking_agent"
    assert agent_key("FrontDesk") != agent_key("booking_agent")


GREETING = [
    TranscriptItem(kind="agent_handoff", turn=0, new_agent="front_desk_agent"),
    TranscriptItem(kind="message", turn=0, role="assistant", text="Welcome! How can I help?"),
]


def greeting(*expect: Expectation) -> list[tuple[bool, str]]:
    results = asyncio.run(check_turn(0, Turn(None, expect, 1), GREETING, None))
    return [(r.passed, r.reason) for r in results]


def test_turn_0_checks_see_the_greeting_first_as_in_livekits_run_result() -> None:
    """The session-start handoff (none -> first agent) is not an event of turn 0..."""
    welcome = Expectation("message", 2, contains=("welcome",))
    assert greeting(welcome, Expectation("no_more_events", 3)) == [(True, ""), (True, "")]
    assert greeting(Expectation("skip", 2, count=1), Expectation("no_more_events", 3)) == [
        (True, ""),
        (True, ""),
    ]


def test_turn_0_can_still_check_which_agent_starts_the_session() -> None:
    """... unless turn 0's first in-order check is a handoff; ``contains:`` always finds it."""
    start = Expectation("handoff", 2, to="FrontDeskAgent")
    welcome = Expectation("message", 3, contains=("welcome",))
    assert greeting(start, welcome) == [(True, ""), (True, "")]
    anywhere = Expectation("handoff", 2, to="FrontDeskAgent", anywhere=True)
    assert greeting(anywhere, welcome) == [(True, ""), (True, "")]


def test_a_handoff_later_in_a_turn_is_always_an_event() -> None:
    handoff = TranscriptItem(kind="agent_handoff", turn=1, old_agent="a", new_agent="b")
    results = asyncio.run(check_turn(0, Turn(None, (Expectation("skip", 1),), 1), [handoff], None))
    assert [r.passed for r in results] == [True]
