"""Judging a conversation: the scenario's expectations, scripted intents, LiveKit's judges.

The verdict comes back through a forced tool call, as in ``livekit.agents.evals``: the model
must call ``submit_verdict`` with a reasoning and one of pass/fail/maybe, so there is no free
text to parse and a malformed answer is detectable (:class:`JudgeError`, which the engine
turns into an ``error`` result rather than a pass or a fail).

A flaky LLM verdict must not block a merge on its own, so a failing verdict can be re-judged
(``rejudge=K``): K more votes, the majority stands, and every vote is kept in
:attr:`lkeval.results.model.Verdict.votes` for the report.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, cast

from livekit.agents.llm import (
    LLM,
    AgentConfigUpdate,
    AgentHandoff,
    ChatContext,
    ChatItem,
    ChatMessage,
    FunctionCall,
    FunctionCallOutput,
    ToolError,
)

from lkeval.llm.client import LLMError, LLMReply, MeteredLLM, call_llm, forced, make_tool
from lkeval.llm.config import BUILTIN_JUDGES, LLMSpec
from lkeval.results.model import TranscriptItem, Usage, Verdict, VerdictValue

__all__ = [
    "BUILTIN_JUDGES",
    "JudgeError",
    "combine_verdicts",
    "judge_conversation",
    "judge_intent",
    "render_transcript",
    "run_builtin_judges",
    "to_chat_context",
]

VERDICTS: tuple[VerdictValue, ...] = ("pass", "fail", "maybe")
_SUBMIT = "submit_verdict"
_SUBMIT_TOOL = make_tool(
    _SUBMIT,
    "Submit your verdict, with the reasoning that leads to it.",
    {
        # reasoning first: with strict schemas the model writes fields in order, so it
        # reasons before it commits to a verdict
        "reasoning": {
            "type": "string",
            "description": "Brief reasoning, citing the turns that decide the verdict.",
        },
        "verdict": {
            "type": "string",
            "enum": list(VERDICTS),
            "description": "pass if every expectation is met, fail if any is not, maybe only "
            "if the conversation does not show enough to decide.",
        },
    },
)

_CONVERSATION_SYSTEM = """\
You are an impartial evaluator of a conversation between an AI agent and a caller (a simulated \
user). You decide whether the agent met the expectations written for this scenario.

How to judge:
- Judge the agent's behaviour against the expectations, every one of them. A pass needs all \
of them met; if any expectation is clearly not met, the verdict is fail.
- The caller's instructions are background: they say what the caller wanted and how they \
behaved, not what the agent had to do.
- Tool calls and their outputs are part of the record. Use them to check what the agent \
actually did (looked up, booked, transferred...) and whether what it told the caller matches \
the tool results. Saying it did something is not doing it.
- Answer maybe only when the conversation does not contain enough to decide (for example it \
ended before the point the expectations are about), never as a hedge.
- Do not judge style, length or tone unless the expectations mention them.
- Call submit_verdict exactly once: first a brief reasoning that cites the deciding turns, \
then the verdict."""

_INTENT_SYSTEM = """\
You check one message an AI agent sent against an intent: a description of what that message \
should say or do. Pass if the message fulfils the intent (the meaning matters, not the exact \
wording); fail if it does not, only partly does, or contradicts it; maybe only if it is \
genuinely ambiguous. The conversation before it is context only. Call submit_verdict exactly \
once: a brief reasoning, then the verdict."""


class JudgeError(Exception):
    """The judge LLM answered, but not with a usable verdict (no call, bad JSON, bad value)."""


def render_transcript(transcript: Sequence[TranscriptItem]) -> str:
    """The conversation as numbered plain text: what both sides said and what the agent did.

    Tool calls (with arguments), their outputs (marked when they are errors) and handoffs are
    included, since most expectations are about what the agent did, not only what it said.
    """
    lines: list[str] = []
    for item in transcript:
        prefix = f"[turn {item.turn}]"
        if item.kind == "message":
            who = {"user": "caller", "assistant": "agent"}.get(item.role or "", item.role)
            cut = " [interrupted]" if item.interrupted else ""
            lines.append(f"{prefix} {who}: {item.text}{cut}")
        elif item.kind == "function_call":
            lines.append(f"{prefix} agent called {item.name}({item.arguments or ''})")
        elif item.kind == "function_call_output":
            verb = "failed with" if item.is_error else "returned"
            lines.append(f"{prefix} {item.name or 'tool'} {verb}: {item.output or ''}")
        elif item.kind == "agent_handoff":
            if item.old_agent:
                lines.append(f"{prefix} handoff from {item.old_agent} to {item.new_agent}")
            else:
                lines.append(f"{prefix} active agent: {item.new_agent}")
        elif item.kind == "agent_config_update":
            lines.append(f"{prefix} agent configuration changed")
    return "\n".join(lines) if lines else "(no messages)"


def _parse_verdict(reply: LLMReply, source: str) -> tuple[VerdictValue, str]:
    call = next((c for c in reply.tool_calls if c.name == _SUBMIT), None)
    if call is None:
        got = (
            f"called {', '.join(c.name for c in reply.tool_calls)}"
            if reply.tool_calls
            else f"answered in text: {' '.join(reply.text.split())[:120]!r}"
        )
        raise JudgeError(f"{source}: the judge did not call {_SUBMIT} ({got})")
    try:
        args = json.loads(call.arguments or "")
    except json.JSONDecodeError as exc:
        raise JudgeError(f"{source}: {_SUBMIT} arguments are not JSON ({exc.msg})") from None
    if not isinstance(args, dict):
        raise JudgeError(f"{source}: {_SUBMIT} arguments are not an object")
    verdict = args.get("verdict")
    if not isinstance(verdict, str):
        raise JudgeError(f"{source}: {_SUBMIT} has no verdict")
    verdict = verdict.strip().lower()
    if verdict not in VERDICTS:
        raise JudgeError(
            f"{source}: unknown verdict {args['verdict']!r} (expected pass/fail/maybe)"
        )
    reasoning = args.get("reasoning")
    return cast(VerdictValue, verdict), reasoning.strip() if isinstance(reasoning, str) else ""


async def _vote(
    llm: LLM, spec: LLMSpec, system: str, prompt: str, source: str
) -> tuple[VerdictValue, str, Usage]:
    ctx = ChatContext()
    ctx.add_message(role="system", content=system)
    ctx.add_message(role="user", content=prompt)
    reply = await call_llm(llm, spec, ctx, tools=[_SUBMIT_TOOL], tool_choice=forced(_SUBMIT))
    verdict, reasoning = _parse_verdict(reply, source)
    return verdict, reasoning, reply.usage


def _majority(votes: Sequence[VerdictValue]) -> VerdictValue:
    """The most common vote; a tie goes to the stricter side (fail, then maybe)."""
    counts = Counter(votes)
    top = max(counts.values())
    return next(v for v in ("fail", "maybe", "pass") if counts.get(v) == top)


async def judge_conversation(
    llm: LLM,
    spec: LLMSpec,
    transcript: Sequence[TranscriptItem],
    expectations: str,
    instructions: str,
    rejudge: int = 0,
) -> tuple[Verdict, Usage]:
    """Judge the whole conversation against the scenario's ``agent_expectations``.

    With ``rejudge=K`` a fail is asked K more times and the majority stands (ties stay
    fail); all votes are kept. Raises :class:`JudgeError` for an unusable answer and
    :class:`lkeval.llm.client.LLMError` when the LLM cannot be reached.
    """
    prompt = (
        f"## The caller's instructions (background)\n{instructions.strip() or '(none)'}\n\n"
        f"## Expectations for the agent (the criteria)\n{expectations.strip()}\n\n"
        f"## The conversation\n{render_transcript(transcript)}\n\n"
        "Did the agent meet every expectation? Call submit_verdict."
    )
    verdict, reasoning, usage = await _vote(llm, spec, _CONVERSATION_SYSTEM, prompt, "judge")
    if verdict != "fail" or rejudge <= 0:
        return Verdict("judge", verdict, reasoning), usage
    more = await asyncio.gather(
        *(_vote(llm, spec, _CONVERSATION_SYSTEM, prompt, "judge") for _ in range(rejudge))
    )
    votes: list[tuple[VerdictValue, str]] = [(verdict, reasoning)]
    for v, r, u in more:
        votes.append((v, r))
        usage = usage + u
    values = tuple(v for v, _ in votes)
    final = _majority(values)
    reason = next(r for v, r in votes if v == final)
    tally = f"{values.count(final)} of {len(values)} votes {final}"
    return Verdict("judge", final, f"{reason} (re-judged: {tally})", values), usage


async def judge_intent(
    llm: LLM,
    spec: LLMSpec,
    message_text: str,
    intent: str,
    context: str | Sequence[TranscriptItem] = "",
) -> tuple[Verdict, Usage]:
    """Check one agent message against a scripted turn's ``intent:``; source ``intent``."""
    history = context if isinstance(context, str) else render_transcript(context)
    prompt = (
        f"## The conversation before the message (context)\n{history.strip() or '(none)'}\n\n"
        f"## The agent's message\n{message_text}\n\n"
        f"## The intent it should fulfil\n{intent.strip()}\n\n"
        "Does the message fulfil the intent? Call submit_verdict."
    )
    verdict, reasoning, usage = await _vote(llm, spec, _INTENT_SYSTEM, prompt, "intent")
    return Verdict("intent", verdict, reasoning), usage


def to_chat_context(
    transcript: Sequence[TranscriptItem], agent_instructions: str | None = None
) -> ChatContext:
    """Our transcript as a livekit ``ChatContext``, for livekit's own judges.

    ``agent_instructions`` becomes a leading ``AgentConfigUpdate``: that is where
    ``task_completion`` looks for the agent's goal.
    """
    items: list[ChatItem] = []
    if agent_instructions:
        items.append(AgentConfigUpdate(instructions=agent_instructions))
    for n, item in enumerate(transcript):
        call_id = item.call_id or f"call_{n}"
        if item.kind == "message" and item.role in ("user", "assistant", "system", "developer"):
            role = cast(Any, item.role)
            items.append(ChatMessage(role=role, content=[item.text], interrupted=item.interrupted))
        elif item.kind == "function_call":
            items.append(
                FunctionCall(call_id=call_id, name=item.name or "", arguments=item.arguments or "")
            )
        elif item.kind == "function_call_output":
            items.append(
                FunctionCallOutput(
                    call_id=call_id,
                    name=item.name or "",
                    output=item.output or "",
                    is_error=bool(item.is_error),
                )
            )
        elif item.kind == "agent_handoff" and item.new_agent:
            items.append(AgentHandoff(old_agent_id=item.old_agent, new_agent_id=item.new_agent))
    return ChatContext(items)


def _builtin_factories() -> dict[str, Callable[[], Any]]:
    from livekit.agents import evals

    return {
        "task_completion": evals.task_completion_judge,
        "tool_use": evals.tool_use_judge,
        "accuracy": evals.accuracy_judge,
        "safety": evals.safety_judge,
        "relevancy": evals.relevancy_judge,
        "coherence": evals.coherence_judge,
        "conciseness": evals.conciseness_judge,
        "handoff": evals.handoff_judge,
    }


async def run_builtin_judges(
    names: Sequence[str],
    llm: LLM,
    transcript: Sequence[TranscriptItem],
    *,
    spec: LLMSpec,
    agent_instructions: str | None = None,
    on_usage: Callable[[Usage], None] | None = None,
) -> list[Verdict]:
    """Run livekit.agents.evals' built-in judges by name; one ``judge:<name>`` verdict each.

    Their prompts are livekit's, unchanged (the vocabulary users know); their LLM calls go
    through :class:`MeteredLLM`, so they get our timeout, retries and error messages and
    their tokens reach ``on_usage``. Raises :class:`JudgeError` (unusable answer) or
    :class:`LLMError`, after every judge has finished.
    """
    factories = _builtin_factories()
    unknown = [n for n in names if n not in factories]
    if unknown:
        raise ValueError(f"unknown judge(s) {', '.join(unknown)}; known: {', '.join(factories)}")
    chat_ctx = to_chat_context(transcript, agent_instructions)
    metered = MeteredLLM(llm, spec)

    async def one(name: str) -> Verdict:
        try:
            result = await factories[name]().evaluate(chat_ctx=chat_ctx, llm=metered)
        except (LLMError, JudgeError):
            raise
        except (ValueError, TypeError, ToolError) as exc:  # livekit's parse of a bad verdict
            text = " ".join(str(exc).split())[:200]
            raise JudgeError(f"judge:{name}: unusable verdict ({text})") from None
        if result.verdict not in VERDICTS:
            raise JudgeError(f"judge:{name}: unknown verdict {result.verdict!r}")
        return Verdict(f"judge:{name}", result.verdict, result.reasoning)

    try:
        outcomes = await asyncio.gather(*(one(n) for n in names), return_exceptions=True)
    finally:
        if on_usage is not None and metered.usage != Usage():
            on_usage(metered.usage)
    verdicts: list[Verdict] = []
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
        verdicts.append(outcome)
    return verdicts


def combine_verdicts(verdicts: Sequence[Verdict], maybe_is_pass: bool = False) -> tuple[bool, str]:
    """AND of all verdicts (LiveKit's rule: the agent's own verdict can veto, never rescue).

    ``maybe`` fails unless ``maybe_is_pass``. The reason names each failing part.
    """
    failing = [
        v for v in verdicts if v.verdict == "fail" or (v.verdict == "maybe" and not maybe_is_pass)
    ]
    reason = "; ".join(
        f"{v.source}: {v.verdict}" + (f" — {v.reason}" if v.reason else "") for v in failing
    )
    return not failing, reason
