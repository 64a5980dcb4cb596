"""One LLM request for the caller or the judge: timeout, retries, temperature, usage, errors.

Every LLM call lk-eval makes goes through :func:`call_llm`, so the policies live in one place:

* temperature 0 where accepted: sent per request (not baked into the LLM) so that when a
  provider rejects it (some reasoning models answer 400) the request is repeated once without
  it, and that LLM is remembered as temperature-less for the rest of the run;
* a deadline per attempt, and retries with exponential backoff on 429, 408, 5xx, timeouts and
  dropped connections, honouring a small ``Retry-After``. livekit's own retry loop
  (``APIConnectOptions.max_retry``) waits a fixed interval and never sees ``Retry-After``, so
  it is set to 0 here and only its ``timeout`` is used;
* token usage from the stream's usage chunk, priced when the model's price is known;
* every failure becomes :class:`LLMError` with one line naming the role, model, host and
  status, never the key (the provider's message is scrubbed of it, too).

:class:`MeteredLLM` wraps an LLM with these policies behind livekit's own ``LLM`` interface,
for code that calls ``llm.chat()`` itself (livekit.agents.evals' built-in judges).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import random
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from livekit.agents import APIConnectionError, APIStatusError, APITimeoutError
from livekit.agents.inference import LLM as InferenceLLM
from livekit.agents.llm import (
    LLM,
    ChatChunk,
    ChatContext,
    ChoiceDelta,
    CompletionUsage,
    FunctionToolCall,
    LLMStream,
    Tool,
    ToolChoice,
    function_tool,
)
from livekit.agents.types import (
    DEFAULT_API_CONNECT_OPTIONS,
    NOT_GIVEN,
    APIConnectOptions,
    NotGivenOr,
)

from lkeval.llm.config import LLMSpec, read_secret
from lkeval.results.model import Usage

_MAX_MESSAGE = 300
# LLMs that rejected a temperature once; weak so a closed LLM is forgotten with it.
_NO_TEMPERATURE: weakref.WeakSet[LLM] = weakref.WeakSet()
# LLMs whose HTTP client reports error responses' Retry-After to _attempt (see _watch_http).
_WATCHED: weakref.WeakSet[LLM] = weakref.WeakSet()
# The current attempt's mailbox for that report. A mutable dict, because the request runs in
# the LLMStream's own task, which sees a copy of this context, not the variable itself.
_HTTP_REPORT: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar(
    "lkeval_http_report", default=None
)


class LLMError(Exception):
    """A caller/judge LLM request failed for good; ``str()`` is one line fit for a report."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class LLMReply:
    """What one successful call produced."""

    text: str
    tool_calls: tuple[FunctionToolCall, ...]
    usage: Usage


@dataclass(frozen=True)
class _Failure:
    """One failed attempt, classified."""

    what: str
    retryable: bool
    status: int | None = None
    retry_after: float | None = None


async def call_llm(
    llm: LLM,
    spec: LLMSpec,
    chat_ctx: ChatContext,
    *,
    tools: Sequence[Tool] = (),
    tool_choice: NotGivenOr[ToolChoice] = NOT_GIVEN,
) -> LLMReply:
    """Run one chat completion under the spec's timeout/retry policy; raise :class:`LLMError`."""
    attempts = 0
    while True:
        attempts += 1
        with_temperature = spec.temperature is not None and llm not in _NO_TEMPERATURE
        try:
            return await _attempt(llm, spec, chat_ctx, tools, tool_choice, with_temperature)
        except _StatusError as wrapped:
            exc = wrapped.error
            if with_temperature and _rejects_temperature(exc):
                _NO_TEMPERATURE.add(llm)
                attempts -= 1  # the provider's quirk, not a failure: retry at once, uncounted
                continue
            failure = _status_failure(exc, wrapped.retry_after)
        except (asyncio.TimeoutError, APITimeoutError):
            failure = _Failure(f"no answer within {spec.timeout:g}s", retryable=True)
        except APIConnectionError as exc:
            failure = _Failure(f"connection failed ({exc})", retryable=exc.retryable)
        except LLMError:
            raise
        except Exception as exc:  # an SDK/plugin bug or misuse: report it, do not retry
            failure = _Failure(f"{type(exc).__name__}: {exc}", retryable=False)
        if not failure.retryable or attempts > spec.max_retries:
            raise LLMError(_message(spec, failure, attempts), status=failure.status) from None
        await asyncio.sleep(_retry_delay(spec, attempts, failure.retry_after))


async def _attempt(
    llm: LLM,
    spec: LLMSpec,
    chat_ctx: ChatContext,
    tools: Sequence[Tool],
    tool_choice: NotGivenOr[ToolChoice],
    with_temperature: bool,
) -> LLMReply:
    extra: dict[str, Any] = {"temperature": spec.temperature} if with_temperature else {}
    kwargs: dict[str, Any] = {}
    if isinstance(llm, InferenceLLM) and spec.role == "judge":
        # As livekit's JudgeGroup: judging is batch work nobody waits on, so it must not
        # compete with live voice traffic for gateway capacity.
        kwargs["inference_class"] = "low"
    _watch_http(llm)
    report: dict[str, float] = {}
    token = _HTTP_REPORT.set(report)
    try:
        stream = llm.chat(
            chat_ctx=chat_ctx,
            tools=list(tools),
            tool_choice=tool_choice,
            conn_options=APIConnectOptions(max_retry=0, timeout=spec.timeout),
            extra_kwargs=extra,
            **kwargs,
        )
    finally:
        _HTTP_REPORT.reset(token)
    try:
        response = await asyncio.wait_for(stream.collect(), timeout=spec.timeout)
    except APIStatusError as exc:
        raise _StatusError(exc, report.get("retry_after")) from exc
    usage = Usage()
    if response.usage is not None:
        tokens_in, tokens_out = response.usage.prompt_tokens, response.usage.completion_tokens
        usage = Usage(tokens_in, tokens_out, spec.cost(tokens_in, tokens_out))
    return LLMReply(response.text, tuple(response.tool_calls), usage)


def _rejects_temperature(exc: APIStatusError) -> bool:
    return exc.status_code in (400, 422) and "temperature" in f"{exc.message} {exc.body}".lower()


class _StatusError(Exception):
    """An HTTP error status with the ``Retry-After`` its response carried, if any."""

    def __init__(self, error: APIStatusError, retry_after: float | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


def _watch_http(llm: LLM) -> None:
    """Have the LLM's HTTP client report ``Retry-After`` of error responses (best effort).

    livekit turns the SDK's HTTP error into its own ``APIStatusError`` without the response
    headers, so the header is read where the response arrives: an httpx response hook on
    the OpenAI client both livekit-plugins-openai and livekit.agents.inference keep in
    ``_client``. If a livekit release moves it, retries simply fall back to backoff.
    """
    if llm in _WATCHED:
        return
    _WATCHED.add(llm)
    http = getattr(getattr(llm, "_client", None), "_client", None)
    hooks = getattr(http, "event_hooks", None)
    if not isinstance(hooks, dict):
        return
    hooks["response"] = [*hooks.get("response", []), _report_retry_after]
    http.event_hooks = hooks  # type: ignore[union-attr]


async def _report_retry_after(response: Any) -> None:
    report = _HTTP_REPORT.get()
    if report is None or response.status_code < 400:
        return
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = response.headers.get(name)
        if value is None:
            continue
        try:
            report["retry_after"] = max(0.0, float(value) * scale)
            return
        except ValueError:
            continue  # an HTTP date: rare for LLM APIs; backoff it is


def _status_failure(exc: APIStatusError, retry_after: float | None) -> _Failure:
    status = exc.status_code
    retryable = status in (408, 409, 429) or status >= 500
    body = exc.body
    detail = body.get("message") if isinstance(body, Mapping) else None
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    what = f"HTTP {status} {phrase}".rstrip() + f": {detail or exc.message}"
    return _Failure(what, retryable, status, retry_after)


def _retry_delay(spec: LLMSpec, attempt: int, retry_after: float | None) -> float:
    if retry_after is not None:
        return min(retry_after, spec.retry_max_delay)
    backoff = min(spec.retry_max_delay, spec.retry_delay * 2 ** (attempt - 1))
    return backoff * random.uniform(0.75, 1.25)  # jitter: parallel scenarios must not sync up


def _message(spec: LLMSpec, failure: _Failure, attempts: int) -> str:
    text = " ".join(failure.what.split())
    for secret in {read_secret(spec), *_livekit_secrets(spec)}:
        if secret and len(secret) >= 6:
            text = text.replace(secret, "***")
    if len(text) > _MAX_MESSAGE:
        text = text[: _MAX_MESSAGE - 1] + "…"
    message = f"{spec.label}: {text}"
    if attempts > 1:
        message += f" (after {attempts} attempts)"
    if failure.status in (401, 403):
        key = spec.api_key_env or f"LKEVAL_{spec.role.upper()}_API_KEY"
        message += f"; check {key}"
    elif failure.status == 404:
        message += f"; check --{spec.role}-model and --{spec.role}-base-url"
    return message


def _livekit_secrets(spec: LLMSpec) -> list[str | None]:
    return [os.environ.get(spec.api_secret_env)] if spec.api_secret_env else []


def make_tool(name: str, description: str, properties: dict[str, Any]) -> Tool:
    """A function tool from a JSON schema, for tools whose calls are read, never executed.

    Every property is required and no other is allowed (OpenAI's strict mode), so a reply
    missing a field is a malformed call rather than a silent default.
    """

    async def _never_called(raw_arguments: dict[str, Any]) -> None:
        raise RuntimeError(f"{name} is read by lk-eval, not executed")

    schema = {
        "name": name,
        "description": description,
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        },
    }
    return function_tool(_never_called, raw_schema=schema)


def forced(tool_name: str) -> ToolChoice:
    """A ``tool_choice`` that makes the model call exactly this tool."""
    return {"type": "function", "function": {"name": tool_name}}


class MeteredLLM(LLM):
    """A livekit ``LLM`` that sends every ``chat()`` through :func:`call_llm` and sums usage.

    Lets code written against livekit's interface (the built-in judges of
    ``livekit.agents.evals``) get lk-eval's retries, timeout and error messages, and lets
    the engine count their tokens per scenario: create one per scenario, read ``usage``.
    """

    def __init__(self, inner: LLM, spec: LLMSpec) -> None:
        super().__init__()
        self.inner = inner
        self.spec = spec
        self.usage = Usage()

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
        reply = await call_llm(
            owner.inner,
            owner.spec,
            self._chat_ctx,
            tools=self._tools,
            tool_choice=self._tool_choice,
        )
        owner.usage = owner.usage + reply.usage
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
