"""The caller's and the judge's LLM: built from its spec, and each request under one policy.

:func:`build_llm` makes the livekit ``LLM`` an :class:`~lkeval.llm.config.LLMSpec` names; this
is the module that imports livekit (~1.5 s), so :mod:`lkeval.llm.config` can resolve and check
a spec fast enough to fail before agents boot. Every LLM call lk-eval makes goes through
:func:`call_llm`, so the policies live in one place:

* temperature 0 where accepted: sent per request (not baked into the LLM) so that when a
  provider rejects it (some reasoning models answer 400) the request is repeated once without
  it, and that LLM is remembered as temperature-less for the rest of the run;
* one bound on the whole call, retries included (``--llm-timeout``): a stream that keeps
  sending tokens is stopped at it as surely as a silent server, and the message says which
  (``still streaming after N s`` or ``no answer within N s``); retries on 408, 409, 429, 5xx,
  timeouts and dropped connections by the OpenAI SDK's own machinery (``max_retries`` on the
  client that :func:`build_llm` makes: exponential backoff with jitter,
  honouring
  ``Retry-After``/``retry-after-ms``), not by a loop of ours. LiveKit Inference is the one
  exception: livekit builds that client with ``max_retries=0`` and no way to change it, so
  livekit's own loop (``APIConnectOptions.max_retry``, a fixed interval) retries there;
* a cap on the reply's length (``max_tokens``), so a weak model cannot ramble until the
  timeout;
* token usage from the stream's usage chunk, priced when the model's price is known: the stream
  is read to its end, where that chunk comes (a few chunks past a complete verdict), and a call
  whose usage never came is counted as such (``Usage.unreported``), never priced as 0;
* every failure becomes :class:`LLMError` with one line naming the role, model, host and
  status, never the key (the provider's message is scrubbed of it, too).

:class:`lkeval.llm.builtin_judges.MeteredLLM` wraps an LLM with these policies behind livekit's
own ``LLM`` interface, for livekit.agents.evals' built-in judges (which call ``llm.chat()``).
"""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from livekit.agents import APIConnectionError, APIError, APIStatusError, APITimeoutError
from livekit.agents.inference import LLM as InferenceLLM
from livekit.agents.llm import (
    LLM,
    ChatContext,
    CompletionUsage,
    FunctionToolCall,
    Tool,
    ToolChoice,
    function_tool,
)
from livekit.agents.types import (
    NOT_GIVEN,
    APIConnectOptions,
    NotGivenOr,
)

from lkeval.llm.config import LLMSpec, check_credentials, read_secret
from lkeval.llm.endpoints import env_value
from lkeval.replay.session import calls_of
from lkeval.results.model import Usage

_MAX_MESSAGE = 300
TAIL_CHUNKS = 24
"""Chunks read after ``done`` says the answer is complete, for the stream's end and its usage
chunk. A server that ends the answer itself (OpenAI; llama.cpp enforcing a JSON schema, whose
grammar allows a few whitespace tokens after the object) ends within them; one that pads to the
token cap (a call a small model wrote as text) is closed after them, its usage unreported."""
# LLMs that rejected a temperature once; weak so a closed LLM is forgotten with it.
_NO_TEMPERATURE: weakref.WeakSet[LLM] = weakref.WeakSet()
# LLMs that refused the older ``max_tokens`` (Azure's reasoning deployments): the newer name.
_NEW_MAX_TOKENS: weakref.WeakSet[LLM] = weakref.WeakSet()


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


def build_llm(spec: LLMSpec, environ: Mapping[str, str] | None = None) -> LLM:
    """A livekit ``LLM`` for the spec; the caller owns it and must ``await llm.aclose()``.

    Temperature is not baked into the LLM: :func:`call_llm` sends it per request so it can drop
    it for a provider that rejects it.
    """
    check_credentials(spec)
    env = os.environ if environ is None else environ
    if spec.backend == "inference":
        from livekit.agents.inference import LLM as InferenceLLM
        from livekit.agents.inference.llm import min_reasoning_effort

        extra: dict[str, Any] = {}
        if (effort := min_reasoning_effort(spec.model)) is not None:
            extra["reasoning_effort"] = effort  # as JudgeGroup does: fastest, cheapest
        return InferenceLLM(
            spec.model,
            base_url=spec.base_url,
            api_key=env_value(env, spec.api_key_env or ""),
            api_secret=env_value(env, spec.api_secret_env or ""),
            extra_kwargs=extra,
        )

    from livekit.plugins import openai as lk_openai

    return lk_openai.LLM(
        model=spec.model,
        base_url=spec.base_url,
        # A keyless local server still needs a non-empty string for the OpenAI SDK.
        api_key=read_secret(spec, env) or "lkeval-no-key",
        # The SDK's own retry machinery: backoff with jitter, honours Retry-After.
        max_retries=spec.max_retries,
    )


async def call_llm(
    llm: LLM,
    spec: LLMSpec,
    chat_ctx: ChatContext,
    *,
    tools: Sequence[Tool] = (),
    tool_choice: NotGivenOr[ToolChoice] = NOT_GIVEN,
    response_format: Mapping[str, Any] | None = None,
    done: Callable[[str], bool] | None = None,
) -> LLMReply:
    """Run one chat completion under the spec's timeout/retry policy; raise :class:`LLMError`.

    Transient failures are retried below this function, by kept machinery (see the module
    docstring); the only repeats here are provider quirks: a rejected temperature (sent
    again without it) and a rejected ``max_tokens`` (sent again as ``max_completion_tokens``),
    each remembered for that LLM. ``response_format`` is sent as is (a structured-output
    schema); ``done(text)`` is asked after each chunk, and once it says the text so far is a
    complete answer the stream is read at most :data:`TAIL_CHUNKS` more chunks for its end and
    usage chunk: a server that pads after its answer (llama.cpp with a small model) is not read
    to the token cap, and its call's usage is then unreported.
    """
    while True:
        with_temperature = spec.temperature is not None and llm not in _NO_TEMPERATURE
        key = "max_completion_tokens" if llm in _NEW_MAX_TOKENS else _max_tokens_key(spec)
        request = _Request(tools, tool_choice, response_format, with_temperature, key, done)
        progress = _Progress(time.monotonic())
        try:
            return await asyncio.wait_for(
                _attempt(llm, spec, chat_ctx, request, progress), timeout=spec.timeout
            )
        except asyncio.TimeoutError:
            failure = _Failure(_timed_out(spec, progress), retryable=False)
        except APITimeoutError:
            failure = _Failure(f"no answer within {spec.timeout:g}s", retryable=True)
        except APIError as exc:
            exc = _root(exc)
            if isinstance(exc, APIStatusError):
                if with_temperature and _rejects(exc, "temperature"):
                    _NO_TEMPERATURE.add(llm)  # the provider's quirk, not a failure: once more
                    continue
                if key == "max_tokens" and spec.max_tokens and _rejects(exc, "max_tokens"):
                    _NEW_MAX_TOKENS.add(llm)
                    continue
                failure = _status_failure(exc)
            elif isinstance(exc, APITimeoutError):
                failure = _Failure(f"no answer within {spec.timeout:g}s", retryable=True)
            else:
                failure = _connection_failure(exc, spec)
        except Exception as exc:  # an SDK/plugin bug or misuse: report it, do not retry
            failure = _Failure(f"{type(exc).__name__}: {exc}", retryable=False)
        attempts = spec.max_retries + 1 if failure.retryable else 1
        raise LLMError(_message(spec, failure, attempts), status=failure.status) from None


def _root(exc: APIError) -> APIError:
    """The failure under livekit's "failed to generate LLM completion after N attempts"."""
    while isinstance(exc, APIConnectionError) and isinstance(exc.__cause__, APIError):
        exc = exc.__cause__
    return exc


def _connection_failure(exc: APIError, spec: LLMSpec) -> _Failure:
    """A refused connection (retried by the SDK) or an error event inside an HTTP 200 stream.

    The plugin wraps what the SDK raised in a bare APIConnectionError; the SDK's message is
    the useful part. The SDK retries only before the response starts, so an in-stream error
    was tried once (livekit's own loop retries it for LiveKit Inference).
    """
    cause = exc.__cause__
    detail = str(cause) if cause is not None and str(cause) else str(exc)
    if cause is not None and type(cause).__name__ == "APIError":  # openai's in-stream error
        retried = spec.backend == "inference" and exc.retryable
        return _Failure(f"error inside the response stream: {detail}", retryable=retried)
    return _Failure(f"connection failed ({detail})", retryable=exc.retryable)


@dataclass(frozen=True)
class _Request:
    """What one call asks for besides the messages."""

    tools: Sequence[Tool]
    tool_choice: NotGivenOr[ToolChoice]
    response_format: Mapping[str, Any] | None
    with_temperature: bool
    max_tokens_key: str
    done: Callable[[str], bool] | None


@dataclass
class _Progress:
    """How far a call got, for the message when ``--llm-timeout`` ends it."""

    started: float
    chunks: int = 0
    tokens: int = 0


def _timed_out(spec: LLMSpec, progress: _Progress) -> str:
    """What happened when the whole-call bound (``--llm-timeout``) ran out.

    Not "after N attempts": the SDK's retries below are invisible here, and a stream that was
    still sending tokens was one long attempt, not a silent server.
    """
    elapsed = time.monotonic() - progress.started
    if not progress.chunks:
        return f"no answer within {spec.timeout:g}s (--llm-timeout bounds the whole call)"
    cap = f" of a {spec.max_tokens}-token cap" if spec.max_tokens else ""
    return (
        f"still streaming after {elapsed:.0f}s (--llm-timeout {spec.timeout:g}s bounds the "
        f"whole call; ~{progress.tokens} tokens so far{cap})"
    )


def _retry_options(llm: LLM, spec: LLMSpec) -> APIConnectOptions:
    """livekit's retry loop only for LiveKit Inference; the OpenAI SDK retries the rest."""
    if isinstance(llm, InferenceLLM):
        # livekit's Inference LLM builds its OpenAI client with max_retries=0 and offers no
        # way to change it, so livekit's own loop (fixed interval) is the kept one that can.
        return APIConnectOptions(
            max_retry=spec.max_retries, retry_interval=spec.retry_delay, timeout=spec.timeout
        )
    return APIConnectOptions(max_retry=0, timeout=spec.timeout)


async def _attempt(
    llm: LLM, spec: LLMSpec, chat_ctx: ChatContext, request: _Request, progress: _Progress
) -> LLMReply:
    """One call, read chunk by chunk (so ``done`` can end it and a timeout can say how far
    it got)."""
    extra: dict[str, Any] = {"temperature": spec.temperature} if request.with_temperature else {}
    if spec.max_tokens:
        extra[request.max_tokens_key] = spec.max_tokens
    if request.response_format is not None:
        extra["response_format"] = dict(request.response_format)
    kwargs: dict[str, Any] = {}
    if isinstance(llm, InferenceLLM) and spec.role == "judge":
        # As livekit's JudgeGroup: judging is batch work nobody waits on, so it must not
        # compete with live voice traffic for gateway capacity.
        kwargs["inference_class"] = "low"
    with calls_of(spec.role):  # its stream's task (made here) records/replays as this role
        stream = llm.chat(
            chat_ctx=chat_ctx,
            tools=list(request.tools),
            tool_choice=request.tool_choice,
            conn_options=_retry_options(llm, spec),
            extra_kwargs=extra,
            **kwargs,
        )
    text: list[str] = []
    calls: list[FunctionToolCall] = []
    usage: CompletionUsage | None = None
    after: int | None = None  # chunks read since the answer was complete
    async with stream:
        async for chunk in stream:
            progress.chunks += 1
            if chunk.delta is not None:
                if chunk.delta.content:
                    text.append(chunk.delta.content)
                    progress.tokens += 1
                calls.extend(chunk.delta.tool_calls or ())
            if chunk.usage is not None:
                usage = chunk.usage
            if after is not None:
                after += 1
                if after > TAIL_CHUNKS:
                    break  # padding to the cap: not worth reading; the usage stays unknown
            elif request.done is not None and text and request.done("".join(text)):
                after = 0  # a complete answer: only the stream's end (and usage) is left
    return LLMReply("".join(text).strip(), tuple(calls), _usage(spec, usage, progress))


def _usage(spec: LLMSpec, usage: CompletionUsage | None, progress: _Progress) -> Usage:
    """Tokens (and cost) of a call. Without a usage chunk (a stream closed early, a server that
    does not send one) the call is ``unreported``: its output counted from the chunks read (one
    token per content chunk, as servers send), its input unknown, its cost unknown, not 0."""
    if usage is None:
        return Usage(0, progress.tokens, None, (spec.model,), (), unreported=1)
    tokens_in, tokens_out = usage.prompt_tokens, usage.completion_tokens
    cost = spec.cost(tokens_in, tokens_out)
    unpriced = (spec.model,) if cost is None else ()
    return Usage(tokens_in, tokens_out, cost, (spec.model,), unpriced)


def _max_tokens_key(spec: LLMSpec) -> str:
    # OpenAI and LiveKit Inference want the newer name (reasoning models refuse max_tokens);
    # self-hosted servers (llama-server, Ollama, vLLM) all read the older one.
    if spec.backend == "inference" or spec.host == "api.openai.com":
        return "max_completion_tokens"
    return "max_tokens"


def _rejects(exc: APIStatusError, parameter: str) -> bool:
    """A 400/422 whose message names the parameter: the provider does not take it."""
    return exc.status_code in (400, 422) and parameter in f"{exc.message} {exc.body}".lower()


def _status_failure(exc: APIStatusError) -> _Failure:
    status = exc.status_code
    retryable = status in (408, 409, 429) or status >= 500
    body = exc.body
    detail = body.get("message") if isinstance(body, Mapping) else None
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    what = f"HTTP {status} {phrase}".rstrip() + f": {detail or exc.message}"
    return _Failure(what, retryable, status)


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
