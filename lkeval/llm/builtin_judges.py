"""LiveKit's built-in judges (``task_completion``, ``safety``...) on an lk-eval transcript.

Their prompts are livekit's, unchanged (the vocabulary users know). What lk-eval adds: the
transcript as a livekit ``ChatContext`` with the agent's own instructions in front (where
``task_completion`` looks for the agent's goal; without them it judges blind), every text in
it a quoted one-line JSON string (livekit writes each item as a line, ``assistant: TEXT``: raw,
a reply with line breaks could write lines of its own that read as a new turn, a note to the
evaluator or the agent's configuration), and their LLM calls through :class:`MeteredLLM`
(lk-eval's timeout, retries, error messages, token counts), below.
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
    ChatChunk,
    ChatContext,
    ChatItem,
    ChatMessage,
    ChoiceDelta,
    CompletionUsage,
    FunctionCall,
    FunctionCallOutput,
    FunctionToolCall,
    LLMStream,
    Tool,
    ToolChoice,
    ToolError,
)
from livekit.agents.types import (
    DEFAULT_API_CONNECT_OPTIONS,
    NOT_GIVEN,
    APIConnectOptions,
    NotGivenOr,
)

from lkeval.llm.client import LLMError, LLMReply, call_llm
from lkeval.llm.config import LLMSpec
from lkeval.llm.judge import JUDGE_RETRIES, VERDICTS, JudgeError, parse_verdict
from lkeval.llm.judge_prompt import quoted
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
            text = quoted(item.text)
            items.append(ChatMessage(role=role, content=[text], interrupted=item.interrupted))
        elif item.kind == "function_call":
            name, arguments = quoted(item.name or ""), quoted(item.arguments or "")
            items.append(FunctionCall(call_id=call_id, name=name, arguments=arguments))
        elif item.kind == "function_call_output":
            items.append(
                FunctionCallOutput(
                    call_id=call_id,
                    name=quoted(item.name or ""),
                    output=quoted(item.output or ""),
                    is_error=bool(item.is_error),
                )
            )
        elif item.kind == "agent_handoff" and item.new_agent:
            old = quoted(item.old_agent) if item.old_agent else None
            items.append(AgentHandoff(old_agent_id=old, new_agent_id=quoted(item.new_agent)))
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


class MeteredLLM(LLM):
    """A livekit ``LLM`` that sends every ``chat()`` through :func:`call_llm` and sums usage.

    Lets code written against livekit's interface (the built-in judges of
    ``livekit.agents.evals``) get lk-eval's retries, timeout and error messages, and lets
    the engine count their tokens per scenario: create one per scenario, read ``usage``.
    """

    def __init__(
        self,
        inner: LLM,
        spec: LLMSpec,
        check: Callable[[LLMReply], LLMReply] | None = None,
        retries: int = 0,
    ) -> None:
        """``check`` may turn a reply into the one the caller should see, or raise to have
        the call asked again (up to ``retries`` times, then its last exception stands)."""
        super().__init__()
        self.inner = inner
        self.spec = spec
        self.usage = Usage()
        self.check = check
        self.retries = retries

    @property
    def model(self) -> str:
        """The wrapped LLM's model (livekit's judges read it)."""
        return self.inner.model

    @property
    def provider(self) -> str:
        """The wrapped LLM's provider."""
        return self.inner.provider

    def chat(
        self,
        *,
        chat_ctx: ChatContext,
        tools: list[Tool] | None = None,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        parallel_tool_calls: NotGivenOr[bool] = NOT_GIVEN,
        tool_choice: NotGivenOr[ToolChoice] = NOT_GIVEN,
        extra_kwargs: NotGivenOr[dict[str, Any]] = NOT_GIVEN,
    ) -> LLMStream:
        """Start a metered call; ``conn_options`` and ``extra_kwargs`` yield to the spec."""
        return _MeteredStream(
            self,
            chat_ctx=chat_ctx,
            tools=tools or [],
            conn_options=conn_options,
            tool_choice=tool_choice,
        )


class _MeteredStream(LLMStream):
    """Runs :func:`call_llm` and replays its reply as chunks (one delta, one usage)."""

    def __init__(
        self,
        owner: MeteredLLM,
        *,
        chat_ctx: ChatContext,
        tools: list[Tool],
        conn_options: APIConnectOptions,
        tool_choice: NotGivenOr[ToolChoice],
    ) -> None:
        super().__init__(owner, chat_ctx=chat_ctx, tools=tools, conn_options=conn_options)
        self._owner = owner
        self._tool_choice = tool_choice

    async def _run(self) -> None:
        owner = self._owner
        for attempt in range(owner.retries + 1):
            reply = await call_llm(
                owner.inner,
                owner.spec,
                self._chat_ctx,
                tools=self._tools,
                tool_choice=self._tool_choice,
            )
            owner.usage = owner.usage + reply.usage
            if owner.check is None:
                break
            try:
                reply = owner.check(reply)
                break
            except Exception:
                if attempt == owner.retries:
                    raise
        self._event_ch.send_nowait(
            ChatChunk(
                id="lkeval-metered",
                delta=ChoiceDelta(
                    role="assistant",
                    content=reply.text or None,
                    tool_calls=list(reply.tool_calls),
                ),
            )
        )
        tokens_in, tokens_out = reply.usage.input_tokens, reply.usage.output_tokens
        self._event_ch.send_nowait(
            ChatChunk(
                id="lkeval-metered",
                usage=CompletionUsage(
                    prompt_tokens=tokens_in,
                    completion_tokens=tokens_out,
                    total_tokens=tokens_in + tokens_out,
                ),
            )
        )
