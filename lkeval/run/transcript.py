"""The agent's chat items, as they arrive on the wire, turned into lk-eval's transcript items.

Pure conversion with no I/O, kept apart from :mod:`lkeval.run.conversation` so the wire
format's details (roles, handoffs, tool calls and outputs) live in one place.
"""

from __future__ import annotations

from livekit.protocol.agent_pb import agent_session as pb

from lkeval.results.model import TranscriptItem
from lkeval.run.spoken_calls import spoken_tool_call

_ROLE_NAMES = {
    pb.USER: "user",
    pb.ASSISTANT: "assistant",
    pb.SYSTEM: "system",
    pb.DEVELOPER: "developer",
}


def chat_item_to_transcript(item: pb.ChatContext.ChatItem, turn: int) -> TranscriptItem | None:
    """Translate one protocol chat item into the result model (None for unknown kinds)."""
    kind = item.WhichOneof("item")
    if kind == "message":
        msg = item.message
        text = "\n".join(c.text for c in msg.content if c.WhichOneof("payload") == "text")
        role = _ROLE_NAMES.get(msg.role, "unknown")
        return TranscriptItem(
            kind="message",
            turn=turn,
            role=role,
            text=text,
            interrupted=msg.interrupted,
            spoken_call=spoken_tool_call(text) if role == "assistant" else None,
        )
    if kind == "function_call":
        call = item.function_call
        return TranscriptItem(
            kind="function_call",
            turn=turn,
            name=call.name,
            arguments=call.arguments,
            call_id=call.call_id,
        )
    if kind == "function_call_output":
        out = item.function_call_output
        return TranscriptItem(
            kind="function_call_output",
            turn=turn,
            name=out.name,
            output=out.output,
            is_error=out.is_error,
            call_id=out.call_id,
        )
    if kind == "agent_handoff":
        handoff = item.agent_handoff
        return TranscriptItem(
            kind="agent_handoff",
            turn=turn,
            old_agent=handoff.old_agent_id if handoff.HasField("old_agent_id") else None,
            new_agent=handoff.new_agent_id,
        )
    if kind == "agent_config_update":
        return TranscriptItem(kind="agent_config_update", turn=turn)
    return None


def state_name(state: int) -> str:
    """An agent state as a word (``AS_THINKING`` -> ``thinking``)."""
    return str(pb.AgentState.Name(state)).removeprefix("AS_").lower()
