"""A caller that leaves its role is not judged: the attempt is an error, never a verdict.

Seen with a 1.5B caller on llama.cpp: it spoke its first line as the agent, then repeated one
line five times and never ended the call, and lk-eval judged the conversation.
"""

from __future__ import annotations

import pytest
from test_caller import AGENT_SAYS, convo, evaluate, play, spec_for

from lkeval.llm.caller_role import caller_flag, role_break
from lkeval.results.model import TranscriptItem, Verdict
from lkeval.run.collaborators import CallerBrokeRole
from lkeval.testing.llm_server import LLMServer

INSTRUCTIONS = "You are Ana. Book a double room for May 3rd. Say goodbye once it is booked."
LOOP = "I would like to know more about your services."
SMALL_MODEL = convo(
    ("assistant", AGENT_SAYS),
    ("user", "Hello! Thank you for calling Hotel Aurora. How can I assist you today?"),
    ("assistant", "I think you are the caller. What do you need?"),
    ("user", LOOP),
    ("assistant", "We have rooms, a spa and a restaurant."),
    ("user", LOOP),
    ("assistant", "Which of them would you like to hear about?"),
    ("user", LOOP),
    ("assistant", "Could you tell me what you are looking for?"),
    ("user", LOOP),
    ("assistant", "Are you still there?"),
    ("user", LOOP),
)
PLAYED = convo(
    ("assistant", AGENT_SAYS),
    ("user", "Hi, I'd like a double room for May 3rd, please."),
    ("assistant", "For how many nights?"),
    ("user", "Just one night."),
    ("assistant", "Is that for Ana?"),
    ("user", "Yes."),
    ("assistant", "And a double room?"),
    ("user", "Yes."),
    ("assistant", "Booked: a double room on May 3rd. Anything else?"),
    ("user", "Yes."),
    ("assistant", "Tuesday?"),
    ("user", "Tuesday."),
)


def test_the_small_models_caller_broke_role_at_its_first_line() -> None:
    why = role_break(SMALL_MODEL, 1, INSTRUCTIONS)
    assert why is not None and why.startswith("its message 1 of 6 is the agent's line:")


@pytest.mark.parametrize(
    "line",
    [
        "Agent: Welcome, how may I help?",
        "Assistant: Sure, let me check that.",
        "Thank you for calling, what can I do for you?",
        "Is there anything else I can help you with?",
    ],
)
def test_a_caller_line_that_is_the_agents_breaks_role(line: str) -> None:
    transcript = convo(("assistant", "Hello."), ("user", line))
    why = role_break(transcript, 1, INSTRUCTIONS)
    assert why is not None and "the agent's line" in why


def test_a_caller_that_says_the_agents_whole_line_back_breaks_role() -> None:
    transcript = convo(
        ("assistant", "We have a double room free on May 3rd for 120 euros."),
        ("user", "We have a double room free on May 3rd for 120 euros."),
    )
    assert "says the agent's line back" in str(role_break(transcript, 1, INSTRUCTIONS))


def test_a_caller_repeating_one_line_while_the_agent_moves_on_breaks_role() -> None:
    repeats = [SMALL_MODEL[0], *SMALL_MODEL[2:]]  # without the agent's line
    why = role_break(repeats, 1, INSTRUCTIONS)
    assert why == f"it said {LOOP!r} 3 times in a row while the agent moved on"


def test_a_caller_answering_an_agent_that_repeats_itself_is_the_agents_loop() -> None:
    loop = convo(
        *[turn for _ in range(4) for turn in (("assistant", "What date?"), ("user", LOOP))]
    )
    assert role_break(loop, 1, "You want to know about the services of the hotel.") is None


def test_a_caller_that_ignores_its_instructions_for_the_whole_call_breaks_role() -> None:
    elsewhere = convo(
        ("assistant", AGENT_SAYS),
        ("user", "What's the weather going to be in Lisbon tomorrow?"),
        ("assistant", "I can only help with the hotel."),
        ("user", "Then tell me a joke, please."),
    )
    why = role_break(elsewhere, 1, INSTRUCTIONS)
    assert why is not None and "shares a word with its instructions" in why
    only_json = convo(("assistant", AGENT_SAYS), ("user", '{"message": "a room"}'))
    assert "echoes or JSON" in str(role_break(only_json, 1, INSTRUCTIONS))


def test_a_caller_that_plays_its_part_is_not_a_role_break() -> None:
    assert role_break(PLAYED, 1, INSTRUCTIONS) is None  # short "Yes." answers are no loop
    assert caller_flag(PLAYED, 1) == Verdict(
        "caller", "pass", "flag: the simulated caller echoed the agent in 1 of 6 message(s)"
    )
    # scripted lines (before the first simulated turn) are the author's, not the caller's
    author = TranscriptItem("message", 1, role="user", text="Agent: how can I help you?")
    later = [TranscriptItem(i.kind, i.turn + 1, role=i.role, text=i.text) for i in PLAYED[1:]]
    assert role_break([PLAYED[0], author, *later], 2, INSTRUCTIONS) is None


def test_the_evaluator_raises_before_any_judge_is_asked() -> None:
    with LLMServer() as server:
        with pytest.raises(CallerBrokeRole) as info:
            evaluate(server, list(SMALL_MODEL), INSTRUCTIONS)
        asked = len(server.requests)
    assert str(info.value).startswith("the simulated caller broke role: its message 1 of 6")
    assert asked == 0


def test_a_caller_in_a_loop_ends_the_call_at_the_third_repeat() -> None:
    """It would otherwise run to --max-turns, as the small model did."""
    with LLMServer([{"text": LOOP}]) as server:
        history: list[TranscriptItem] = [SMALL_MODEL[0]]
        for n, agent in enumerate(("We have rooms.", "Which one?"), 1):
            history += [
                TranscriptItem("message", n, role="user", text=LOOP),
                TranscriptItem("message", n, role="assistant", text=agent),
            ]
        (turn,) = play(spec_for(server), [history])
    assert turn.text == LOOP and turn.ended
    assert turn.reason == "it said the same line 3 times"


def test_a_caller_that_speaks_as_the_agent_ends_the_call_after_that_line() -> None:
    with LLMServer([{"text": "Hello! How can I assist you today?"}]) as server:
        (turn,) = play(spec_for(server), [[SMALL_MODEL[0]]])
    assert turn.text == "Hello! How can I assist you today?"
    assert turn.ended and turn.reason == "it spoke as the agent"
