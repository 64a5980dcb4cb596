"""Negative controls: each a deterministic, known-bad edit of a passing transcript."""

from __future__ import annotations

import json

from report_fixtures import BOOKING_TRANSCRIPT, msg

from lkeval.results.controls import CONTROL_KINDS, REFUSAL, negative_controls


def controls() -> dict[str, tuple]:  # type: ignore[type-arg]
    return dict(negative_controls(BOOKING_TRANSCRIPT))


def test_a_booking_transcript_gets_every_kind_of_control_in_order() -> None:
    assert [kind for kind, _ in negative_controls(BOOKING_TRANSCRIPT)] == list(CONTROL_KINDS)
    assert negative_controls(BOOKING_TRANSCRIPT) == negative_controls(BOOKING_TRANSCRIPT)


def test_the_decisive_tool_call_and_its_output_are_dropped() -> None:
    kinds = [item.kind for item in controls()["drop-tool-call"]]
    assert "function_call" not in kinds and "function_call_output" not in kinds
    assert controls()["drop-tool-call"][-1].text == "Booked! Your confirmation is GH-1042."


def test_booked_values_change_in_the_call_and_what_the_agent_said() -> None:
    changed = controls()["changed-values"]
    call = next(item for item in changed if item.kind == "function_call")
    assert json.loads(call.arguments or "") == {"check_in": "2025-03-04", "nights": 3}
    # "2" (nights) is too short to be told apart in what the agent said: that stays
    assert changed[-1].text == "Booked! Your confirmation is GH-1042."
    named = (
        msg(1, "user", "Book for Smith."),
        BOOKING_TRANSCRIPT[2].__class__(
            kind="function_call", turn=1, name="book", arguments='{"name": "Smith"}'
        ),
        msg(1, "assistant", "Done, Smith."),
    )
    renamed = dict(negative_controls(named))["changed-values"]
    assert renamed[-1].text == "Done, Htims." and "Htims" in (renamed[1].arguments or "")


def test_the_confirmation_is_removed_or_replaced_by_a_refusal() -> None:
    assert controls()["no-confirmation"] == BOOKING_TRANSCRIPT[:-1]
    assert controls()["refusal"][-1].text == REFUSAL


def test_a_transcript_without_tool_calls_or_replies_gets_only_what_applies() -> None:
    chat = (msg(1, "user", "Hi"), msg(1, "assistant", "Hello!"))
    assert [k for k, _ in negative_controls(chat)] == ["no-confirmation", "refusal"]
    assert negative_controls((msg(1, "user", "Hi"),)) == []
