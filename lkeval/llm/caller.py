"""The simulated caller: an LLM playing the user of a scenario, one message per turn.

The caller sees the conversation from its own side of the line: the agent's messages are
the other party's (``user`` role in its context) and its own earlier messages are its
(``assistant``) turns. Tool calls, tool outputs and handoffs are hidden from it, as a real
caller would never see them, and showing them tempts the model to play the agent.

It ends the call through an explicit ``end_call`` tool rather than a magic phrase, so
"goodbye" inside a message never ends a call by accident, and the reason is recorded.
How long a call may run is the engine's business (``--max-turns``), not the caller's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from livekit.agents.llm import LLM, ChatContext

from lkeval.llm.client import LLMReply, call_llm, make_tool
from lkeval.llm.config import LLMSpec
from lkeval.results.model import TranscriptItem, Usage

__all__ = ["CallerTurn", "SimulatedCaller", "caller_chat_context"]

END_CALL = "end_call"
_END_CALL_TOOL = make_tool(
    END_CALL,
    "End the call. Use it when your goal is done, when it clearly cannot be done, when the "
    "agent has ended the conversation, or when your instructions say to stop. You may still "
    "say a short goodbye in the same turn.",
    {"reason": {"type": "string", "description": "Why the call ends, in a few words."}},
)

_SYSTEM = """\
You are role-playing a person who is talking to an AI agent, so that the agent can be tested. \
You are the caller (the customer, the user). You are never the agent.

Who you are and what you want:
<instructions>
{instructions}
</instructions>

How to play the caller:
- Stay in character for the whole conversation. Never say or hint that you are an AI, a \
simulation or a test, and never mention these instructions.
- The messages you receive are what the agent says. Reply to what it just said, as your \
character would. If your instructions describe a manner (impatient, confused, changing your \
mind, switching language), behave that way.
- Write exactly one message per turn, the words you would say out loud: short and natural \
(usually one or two sentences), no markdown, no lists, no stage directions, no name or \
"Caller:" prefix.
- Give details when they are relevant or the agent asks for them, using the ones in your \
instructions. Don't contradict them; if the agent asks for something they don't cover, answer \
plausibly in character.
- Never play the agent: don't answer your own questions, don't describe what the agent does, \
don't write the agent's lines.
- When your goal is done, when it clearly cannot be done, when the agent ends the \
conversation, or when your instructions say to stop, call the end_call tool with a short \
reason. You may say a brief goodbye in that same turn. Otherwise keep going until then."""

_OPENING = "(The call has connected. The agent has not said anything yet. Start the conversation.)"
_SILENCE = "(The agent did not reply.)"
_PREFIX = re.compile(r"^\s*(?:caller|user|customer|me)\s*:\s*", re.IGNORECASE)


@dataclass(frozen=True)
class CallerTurn:
    """The caller's next move: a message to send (or None), and whether the call ends."""

    text: str | None
    ended: bool
    reason: str
    usage: Usage


def caller_chat_context(instructions: str, transcript: Sequence[TranscriptItem]) -> ChatContext:
    """The conversation as the caller sees it, roles flipped, tools and handoffs hidden.

    Consecutive agent messages are merged into one turn (an agent often speaks twice in a
    row, e.g. around a tool call), and a caller message left unanswered gets an explicit
    note, so the roles alternate as chat models expect.
    """
    ctx = ChatContext()
    ctx.add_message(role="system", content=_SYSTEM.format(instructions=instructions.strip()))
    turns: list[tuple[str, str]] = []  # (role in the caller's context, text)
    for item in transcript:
        if item.kind != "message" or not item.text.strip():
            continue
        if item.role == "assistant":
            text = item.text.strip() + (" [cut off]" if item.interrupted else "")
            role = "user"
        elif item.role == "user":
            text, role = item.text.strip(), "assistant"
        else:
            continue
        if turns and turns[-1][0] == role:
            turns[-1] = (role, f"{turns[-1][1]}\n{text}")
        else:
            turns.append((role, text))
    if not turns or turns[0][0] == "assistant":
        turns.insert(0, ("user", _OPENING))
    if turns[-1][0] == "assistant":
        turns.append(("user", _SILENCE))
    for role, text in turns:
        ctx.add_message(role="user" if role == "user" else "assistant", content=text)
    return ctx


def _clean(text: str) -> str:
    text = _PREFIX.sub("", text.strip())
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()  # models sometimes quote the line they "say"
    return text


def _end_reason(reply: LLMReply) -> str | None:
    call = next((c for c in reply.tool_calls if c.name == END_CALL), None)
    if call is None:
        return None
    try:
        args = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        args = {}
    reason = args.get("reason") if isinstance(args, dict) else None
    return reason.strip() if isinstance(reason, str) and reason.strip() else "caller ended the call"


class SimulatedCaller:
    """Plays the scenario's ``instructions`` against the agent, one message per turn."""

    def __init__(self, llm: LLM, spec: LLMSpec, instructions: str) -> None:
        self.llm = llm
        self.spec = spec
        self.instructions = instructions

    async def next_message(self, transcript: Sequence[TranscriptItem]) -> CallerTurn:
        """The caller's next message given the conversation so far, or the end of the call.

        A message together with ``end_call`` means: send it, then hang up. A reply with
        neither a message nor ``end_call`` is asked once more, then taken as the caller
        having nothing left to say. Raises :class:`lkeval.llm.client.LLMError`.
        """
        ctx = caller_chat_context(self.instructions, transcript)
        usage = Usage()
        for _ in range(2):
            reply = await call_llm(self.llm, self.spec, ctx, tools=[_END_CALL_TOOL])
            usage = usage + reply.usage
            text = _clean(reply.text) or None
            reason = _end_reason(reply)
            if reason is not None:
                return CallerTurn(text, True, reason, usage)
            if text:
                return CallerTurn(text, False, "", usage)
        return CallerTurn(None, True, "the simulated caller had nothing more to say", usage)
