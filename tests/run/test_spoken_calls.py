"""An agent whose LLM writes a tool call as text (and so speaks it to the caller) fails.

A small model behind llama.cpp answers a request with tools by writing the call into its reply
(``{"name": "collect_email", "arguments": {}}``); the agent speaks it and the tool never runs.
"""

from __future__ import annotations

import pytest
from livekit.protocol.agent_pb import agent_session as pb

from lkeval.results.model import TranscriptItem
from lkeval.results.wording import format_item
from lkeval.run.spoken_calls import SOURCE, spoken_call_verdict, spoken_tool_call
from lkeval.run.transcript import chat_item_to_transcript


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "collect_email", "arguments": {}}',
        '```json\n{"name": "collect_email", "arguments": {"email": "a@b.c"}}\n```',
        '<tool_call>\n{"name": "collect_email", "arguments": {}}\n</tool_call>',
        'Sure! {"function": {"name": "collect_email", "arguments": "{}"}}',
        '[{"name": "collect_email", "parameters": {}}]',
    ],
)
def test_a_call_written_as_text_is_found(text: str) -> None:
    assert spoken_tool_call(text) == "collect_email"


@pytest.mark.parametrize(
    "text",
    [
        "Could you tell me your email address?",
        '{"name": "Ada", "room": "double"}',  # JSON, but no call's shape
        "Use the {name} field.",
    ],
)
def test_ordinary_speech_is_not_a_call(text: str) -> None:
    assert spoken_tool_call(text) is None


def message(role: int, text: str) -> pb.ChatContext.ChatItem:
    content = [pb.ChatMessage.ChatContent(text=text)]
    return pb.ChatContext.ChatItem(message=pb.ChatMessage(role=role, content=content))


def test_the_transcript_marks_the_agents_spoken_call_and_the_check_fails_it() -> None:
    spoken = '{"name": "collect_email", "arguments": {}}'
    agent = chat_item_to_transcript(message(pb.ASSISTANT, spoken), 2)
    caller = chat_item_to_transcript(message(pb.USER, spoken), 2)
    assert agent is not None and agent.spoken_call == "collect_email"
    assert caller is not None and caller.spoken_call is None  # the caller's lines are not checked
    verdict = spoken_call_verdict([caller, agent])
    assert verdict is not None and (verdict.source, verdict.verdict) == (SOURCE, "fail")
    assert "turn 2: collect_email" in verdict.reason and "did not call it" in verdict.reason
    fine = TranscriptItem("message", 1, role="assistant", text="What is your email?")
    assert spoken_call_verdict([fine]) is None


def test_the_reports_transcript_line_says_the_tool_was_not_called() -> None:
    item = TranscriptItem("message", 2, role="assistant", text="{...}", spoken_call="collect_email")
    assert format_item(item) == (
        "[2] assistant: {...} (a tool call written as text: collect_email was not called)"
    )
