"""``lkeval dev``'s live display: each message and tool call as the session reports it,
numbered by the caller's turns, masked and inert (the conversation is untrusted text)."""

from __future__ import annotations

import io

import pytest
from livekit.protocol.agent_pb import agent_session as pb

from lkeval.publish.live_transcript import LiveTranscript
from lkeval.results.model import ScenarioResult
from lkeval.text.masking import reset_process_masker


def _message(role: int, text: str) -> pb.AgentSessionEvent:
    message = pb.ChatMessage(role=role, content=[pb.ChatMessage.ChatContent(text=text)])
    added = pb.AgentSessionEvent.ConversationItemAdded(
        item=pb.ChatContext.ChatItem(message=message)
    )
    return pb.AgentSessionEvent(conversation_item_added=added)


def _tools() -> pb.AgentSessionEvent:
    call = pb.FunctionCall(call_id="c1", name="book_room", arguments='{"guest": "Ada"}')
    output = pb.FunctionCallOutput(call_id="c1", name="book_room", output="Booked.")
    executed = pb.AgentSessionEvent.FunctionToolsExecuted(
        function_calls=[call], function_call_outputs=[output]
    )
    return pb.AgentSessionEvent(function_tools_executed=executed)


def test_the_conversation_is_printed_as_it_happens() -> None:
    out = io.StringIO()
    live = LiveTranscript(out, total=1)
    live.scenario_started("SCN_book", "Books a room")
    live.conversation_begins("SCN_book")
    for event in (
        _message(pb.ASSISTANT, "Welcome!"),
        _message(pb.USER, "Book it for Ada"),
        pb.AgentSessionEvent(agent_state_changed=pb.AgentSessionEvent.AgentStateChanged()),
        _tools(),
        _message(pb.ASSISTANT, "Done."),
    ):
        live(event)
    lines = out.getvalue().splitlines()
    assert lines[0] == "▶ Books a room (SCN_book)"
    assert lines[1:] == [
        "    [0] assistant: Welcome!",
        "    [1] user: Book it for Ada",
        '    [1] → call book_room({"guest": "Ada"})',
        "    [1] ← book_room: Booked.",
        "    [1] assistant: Done.",
    ]
    live.scenario_finished(
        ScenarioResult("SCN_book", "Books a room", "", "", "s.yaml", 1, "passed")
    )
    assert "✓ Books a room" in out.getvalue().splitlines()[-1]


def test_a_secret_or_a_workflow_command_in_the_conversation_is_not_printed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-transcript-secret-123456")
    reset_process_masker()
    out = io.StringIO()
    live = LiveTranscript(out)
    live(_message(pb.ASSISTANT, "my key is sk-live-transcript-secret-123456"))
    live(_message(pb.ASSISTANT, "line one\n::error::owned"))
    text = out.getvalue()
    assert "sk-live-transcript-secret-123456" not in text
    assert not any(line.startswith("::") for line in text.splitlines())


def test_each_conversation_is_under_its_own_scenario_when_the_next_one_starts_early() -> None:
    """The next scenario's agent starts while one still plays: its line waits for its
    conversation, so no transcript is printed under the wrong scenario."""
    out = io.StringIO()
    live = LiveTranscript(out, total=3)
    live.scenario_started("SCN_a", "First")
    live.scenario_started("SCN_b", "Second")
    live.scenario_started("SCN_c", "Never talks")
    live.conversation_begins("SCN_a")
    live(_message(pb.ASSISTANT, "Hello from A."))
    live.conversation_begins("SCN_b")
    live(_message(pb.ASSISTANT, "Hello from B."))
    live.scenario_finished(ScenarioResult("SCN_c", "Never talks", "", "", "s.yaml", 1, "error"))
    lines = out.getvalue().splitlines()
    assert lines[:4] == [
        "▶ First (SCN_a)",
        "    [0] assistant: Hello from A.",
        "▶ Second (SCN_b)",
        "    [0] assistant: Hello from B.",
    ]
    assert not any("▶ Never talks" in line for line in lines)
