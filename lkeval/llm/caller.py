"""The simulated caller: an LLM playing the user of a scenario, one message per turn.

The caller sees the conversation from its own side of the line: the agent's messages are
the other party's (``user`` role in its context) and its own earlier messages are its
(``assistant``) turns. Tool calls, tool outputs and handoffs are hidden from it, as a real
caller would never see them, and showing them tempts the model to play the agent.

It ends the call through an explicit ``end_call`` tool rather than a magic phrase, so
"goodbye" inside a message never ends a call by accident, and the reason is recorded. A weak
model that writes the call as text (JSON, ``end_call(...)``) is understood the same way, and
that text is never spoken to the agent. The caller may not hang up before it has tried its
goal: an ``end_call`` before the agent has answered any caller message is not honoured.
How long a call may run is the engine's business (``--max-turns``), not the caller's.

Notes about the call (it has just connected, the agent did not reply) are not written as
messages of either party where that can be avoided: the opening note is in the system prompt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from livekit.agents.llm import LLM, ChatContext

from lkeval.llm.caller_role import REPEAT_WORDS, REPEATS, is_agent_line, words
from lkeval.llm.client import LLMReply, call_llm, make_tool
from lkeval.llm.config import LLMSpec
from lkeval.llm.textcalls import find_calls, without
from lkeval.results.model import TranscriptItem, Usage

__all__ = ["CallerTurn", "SimulatedCaller", "caller_chat_context", "has_tried"]

END_CALL = "end_call"
_END_CALL_TOOL = make_tool(
    END_CALL,
    "End the call, only after you have asked for what you want and the agent has answered. "
    "Use it when your goal is done, when it clearly cannot be done, when the agent has ended "
    "the conversation, or when your instructions say to stop. You may still say a short "
    "goodbye in the same turn.",
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
- First ask for what you want. Only after you have tried your goal and the agent has \
answered: when the goal is done, when it clearly cannot be done, when the agent ends the \
conversation, or when your instructions say to stop, call the end_call tool with a short \
reason (never write it as text). You may say a brief goodbye in that same turn. Otherwise \
keep going until then.{opening}"""

_OPENING = """

The call has just connected and the agent has not said anything yet: you speak first. Start \
the conversation."""
_TOO_EARLY = """

You have not asked for what you want yet, so the call cannot end now. Say your first line \
to the agent."""
_SILENCE = "(The agent did not reply.)"
_PREFIX = re.compile(r"^\s*(?:caller|user|customer|me)\s*:\s*", re.IGNORECASE)


@dataclass(frozen=True)
class CallerTurn:
    """The caller's next move: a message to send (or None), and whether the call ends."""

    text: str | None
    ended: bool
    reason: str
    usage: Usage


def caller_chat_context(
    instructions: str, transcript: Sequence[TranscriptItem], *, too_early: bool = False
) -> ChatContext:
    """The conversation as the caller sees it, roles flipped, tools and handoffs hidden.

    Consecutive agent messages are merged into one turn (an agent often speaks twice in a
    row, e.g. around a tool call), and a caller message left unanswered gets an explicit
    note, so the roles alternate as chat models expect. When nobody has spoken yet, the
    system prompt says the caller speaks first (no invented user turn).
    """
    turns = _turns(transcript)
    note = _OPENING if not turns else ""
    if too_early:
        note += _TOO_EARLY
    ctx = ChatContext()
    system = _SYSTEM.format(instructions=instructions.strip(), opening=note)
    ctx.add_message(role="system", content=system)
    for role, text in turns:
        ctx.add_message(role="user" if role == "user" else "assistant", content=text)
    return ctx


def _turns(transcript: Sequence[TranscriptItem]) -> list[tuple[str, str]]:
    """(role in the caller's context, text) of each turn, merged so roles alternate."""
    turns: list[tuple[str, str]] = []
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
    if turns and turns[-1][0] == "assistant":
        turns.append(("user", _SILENCE))
    return turns


def has_tried(transcript: Sequence[TranscriptItem]) -> bool:
    """Whether the agent has answered at least one caller message (the goal was tried)."""
    asked = False
    for item in transcript:
        if item.kind != "message" or not item.text.strip():
            continue
        if item.role == "user":
            asked = True
        elif item.role == "assistant" and asked:
            return True
    return False


def _clean(text: str) -> str:
    text = _PREFIX.sub("", text.strip())
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()  # models sometimes quote the line they "say"
    return text


def _reason(args: Any) -> str:
    reason = args.get("reason") if isinstance(args, dict) else None
    return reason.strip() if isinstance(reason, str) and reason.strip() else "caller ended the call"


def _read(reply: LLMReply) -> tuple[str | None, str | None]:
    """The line to say (or None) and the end-of-call reason (or None) of one reply.

    ``end_call`` written as text counts as the call and is cut out of what is said.
    """
    call = next((c for c in reply.tool_calls if c.name == END_CALL), None)
    reason: str | None = None
    if call is not None:
        try:
            reason = _reason(json.loads(call.arguments or "{}"))
        except json.JSONDecodeError:
            reason = _reason({})
    text = reply.text
    if written := find_calls(text, END_CALL):
        reason = reason or _reason(written[0].arguments)
        text = without(text, written)
    return _clean(text) or None, reason


class SimulatedCaller:
    """Plays the scenario's ``instructions`` against the agent, one message per turn."""

    def __init__(self, llm: LLM, spec: LLMSpec, instructions: str) -> None:
        self.llm = llm
        self.spec = spec
        self.instructions = instructions

    async def next_message(self, transcript: Sequence[TranscriptItem]) -> CallerTurn:
        """The caller's next message given the conversation so far, or the end of the call.

        A message together with ``end_call`` means: send it, then hang up. An ``end_call``
        before the goal was tried (:func:`has_tried`) is not honoured: a message with it is
        sent and the call goes on; without one, the caller is asked once more with a note
        that it cannot hang up yet. A reply with neither a message nor ``end_call`` is asked
        once more, then taken as the caller having nothing left to say. A line the caller has
        said in each of its last turns, :data:`~lkeval.llm.caller_role.REPEATS` times with this
        one, is sent and ends the call (a caller in a loop would run to ``--max-turns``; the
        role check then makes the attempt an error); so does a line that is the agent's
        (:func:`~lkeval.llm.caller_role.is_agent_line`). Raises
        :class:`lkeval.llm.client.LLMError`.
        """
        tried = has_tried(transcript)
        usage = Usage()
        early: str | None = None  # the reason of an end_call that came too early
        for _ in range(2):
            ctx = caller_chat_context(self.instructions, transcript, too_early=bool(early))
            reply = await call_llm(self.llm, self.spec, ctx, tools=[_END_CALL_TOOL])
            usage = usage + reply.usage
            text, reason = _read(reply)
            if reason is not None and not tried:
                if text:
                    return CallerTurn(text, False, "", usage)
                early = reason
                continue
            if reason is not None:
                return CallerTurn(text, True, reason, usage)
            if text and _loops(transcript, text):
                return CallerTurn(text, True, f"it said the same line {REPEATS} times", usage)
            if text and is_agent_line(text):  # said, so the role check sees it; then no more
                return CallerTurn(text, True, "it spoke as the agent", usage)
            if text:
                return CallerTurn(text, False, "", usage)
        if early:
            return CallerTurn(None, True, f"{early} (before trying its goal)", usage)
        return CallerTurn(None, True, "the simulated caller had nothing more to say", usage)


def _loops(transcript: Sequence[TranscriptItem], text: str) -> bool:
    """Whether ``text`` is the caller's line of each of its last ``REPEATS - 1`` turns."""
    said = [
        words(item.text)
        for item in transcript
        if item.kind == "message" and item.role == "user" and item.text.strip()
    ]
    last = said[-(REPEATS - 1) :]
    line = words(text)
    return len(line.split()) >= REPEAT_WORDS and last == [line] * (REPEATS - 1)
