"""LiveKit's built-in judges (``task_completion``, ``safety``...) on an lk-eval transcript.

Their prompts are livekit's, unchanged (the vocabulary users know). What lk-eval adds: the
transcript as a livekit ``ChatContext`` with the agent's own instructions in front (where
``task_completion`` looks for the agent's goal; without them it judges blind), and their LLM
calls through :class:`~lkeval.llm.client.MeteredLLM` (lk-eval's timeout, retries, error
messages, token counts).
"""

from __future__ import annotations

import asyncio
import json
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
    FunctionToolCall,
    ToolError,
)

from lkeval.llm.client import LLMError, LLMReply, MeteredLLM
from lkeval.llm.config import LLMSpec
from lkeval.llm.judge import JUDGE_RETRIES, VERDICTS, JudgeError, parse_verdict
from lkeval.results.model import TranscriptItem, Usage, Verdict
from lkeval.text.masking import clip

__all__ = ["run_builtin_judges", "to_chat_context"]


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


def _one_verdict(reply: LLMReply) -> LLMReply:
    """The reply as one clean ``submit_verdict`` call, as lk-eval's own judge reads it.

    livekit's judges take the first tool call as it is: two calls that disagree would pass on
    the first, a verdict written as text would be an error. Here they get what
    :func:`lkeval.llm.judge.parse_verdict` makes of it (an unambiguous text verdict, or
    :class:`JudgeError`, which has the call asked again).
    """
    verdict, reasoning = parse_verdict(reply, "judge")
    arguments = json.dumps({"verdict": verdict, "reasoning": reasoning})
    call = FunctionToolCall(name="submit_verdict", arguments=arguments, call_id="lkeval-verdict")
    return LLMReply("", (call,), reply.usage)


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
    metered = MeteredLLM(llm, spec, check=_one_verdict, retries=JUDGE_RETRIES)

    async def one(name: str) -> Verdict:
        try:
            result = await factories[name]().evaluate(chat_ctx=chat_ctx, llm=metered)
        except LLMError:
            raise
        except JudgeError as exc:  # from _one_verdict: name the judge that answered so
            detail = str(exc).removeprefix("judge: ")
            raise JudgeError(f"judge:{name}: {detail}") from None
        except (ValueError, TypeError, ToolError) as exc:  # livekit's parse of a bad verdict
            text = clip(" ".join(str(exc).split()), 200)
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
