"""A session's conversation (``AgentSession.history``) in lk-eval's transcript terms.

The judges and the simulated caller read lk-eval's :class:`TranscriptItem`; a test that builds
its own session has LiveKit's chat items. Turn 0 is what the agent said before the caller's
first line (its greeting); each user message starts the next turn, as in ``lkeval run``.
"""

from __future__ import annotations

from typing import Any

from lkeval.results.model import TranscriptItem


def session_transcript(session: Any) -> list[TranscriptItem]:
    """The session's chat items so far, as transcript items."""
    items: list[TranscriptItem] = []
    turn = 0
    for item in session.history.items:
        if item.type == "message" and item.role == "user":
            turn += 1
        converted = chat_item(item, turn)
        if converted is not None:
            items.append(converted)
    return items


def chat_item(item: Any, turn: int) -> TranscriptItem | None:
    """One LiveKit chat item as a transcript item (None: nothing a judge reads, a system
    message or an agent config update)."""
    if item.type == "message":
        if item.role not in ("user", "assistant"):
            return None
        text = item.text_content or ""
        return TranscriptItem(
            "message", turn, role=item.role, text=text, interrupted=bool(item.interrupted)
        )
    if item.type == "function_call":
        return TranscriptItem(
            "function_call", turn, name=item.name, arguments=item.arguments, call_id=item.call_id
        )
    if item.type == "function_call_output":
        return TranscriptItem(
            "function_call_output",
            turn,
            name=item.name,
            output=item.output,
            is_error=item.is_error,
            call_id=item.call_id,
        )
    if item.type == "agent_handoff":
        return TranscriptItem(
            "agent_handoff", turn, old_agent=item.old_agent_id, new_agent=item.new_agent_id
        )
    return None
