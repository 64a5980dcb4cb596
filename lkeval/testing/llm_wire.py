"""The JSON the scripted LLM server sends: completions, stream chunks, errors, as real servers do.

Kept apart from the HTTP handling so the wire format can be read in one place. Shapes follow
OpenAI's chat-completions API; ``timings`` and the in-stream error event follow llama.cpp's
``llama-server``, whose clients (the ``openai`` SDK, livekit-plugins-openai) must cope with both.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import replace
from http import HTTPStatus
from typing import Any

from lkeval.testing.llm_rules import Reply

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_exceeded",
}
# Seconds between two words of a rambling answer: fast enough to fill a client's buffer,
# slow enough not to spin a core while a test waits for its timeout.
RAMBLE_INTERVAL = 0.02
RAMBLE_WORDS = ("and", "so", "on", "and", "so", "forth,", "as", "I", "was", "saying,")
# What llama.cpp reports as its build; real servers put such a string in system_fingerprint.
LLAMA_FINGERPRINT = "b6000-lkeval"


def tokens(text: str) -> int:
    """A rough token count (chars / 4): callers only need plausible, non-zero usage."""
    return (len(text) + 3) // 4


def usage(prompt: int, reply: Reply) -> dict[str, int]:
    """The ``usage`` object for ``reply``."""
    completion = tokens(
        (reply.text or "") + "".join(c.name + c.arguments for c in reply.tool_calls)
    )
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def timings(prompt: int, completion: int) -> dict[str, float]:
    """llama.cpp's ``timings`` object (plausible figures; clients must only tolerate it)."""
    return {
        "prompt_n": prompt,
        "prompt_ms": prompt * 0.5,
        "prompt_per_token_ms": 0.5,
        "prompt_per_second": 2000.0,
        "predicted_n": completion,
        "predicted_ms": completion * 20.0,
        "predicted_per_token_ms": 20.0,
        "predicted_per_second": 50.0,
    }


def _tool_call_json(index: int, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "index": index,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def _finish(reply: Reply, finish: str | None) -> str:
    return finish or ("tool_calls" if reply.tool_calls else "stop")


def completion_body(
    reply: Reply,
    model: str,
    prompt_tokens: int,
    *,
    finish: str | None = None,
    with_timings: bool = False,
) -> dict[str, Any]:
    """A non-streaming ``chat.completion`` object for ``reply``."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                k: v
                for k, v in _tool_call_json(i, call_id(), c.name, c.arguments).items()
                if k != "index"
            }
            for i, c in enumerate(reply.tool_calls)
        ]
    used = usage(prompt_tokens, reply)
    body = {
        "id": completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": LLAMA_FINGERPRINT if with_timings else None,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _finish(reply, finish),
            }
        ],
        "usage": used,
    }
    if with_timings:
        body["timings"] = timings(prompt_tokens, used["completion_tokens"])
    return body


def text_pieces(text: str | None) -> list[str]:
    """``text`` split word by word (with its spaces), the way a model streams it."""
    return re.findall(r"\s*\S+\s*", text or "") or ([text] if text else [])


class ChunkMaker:
    """Builds the ``chat.completion.chunk`` objects of one streamed answer."""

    def __init__(self, model: str, include_usage: bool, with_timings: bool = False) -> None:
        self.base = {
            "id": completion_id(),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": LLAMA_FINGERPRINT if with_timings else None,
        }
        self.include_usage = include_usage
        self.with_timings = with_timings

    def delta(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        """One chunk carrying ``delta`` (and a finish reason on the last one)."""
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        extra = {"usage": None} if self.include_usage else {}
        return {**self.base, "choices": [choice], **extra}

    def ending(self, finish: str, used: dict[str, int]) -> list[dict[str, Any]]:
        """The finish chunk, then the usage chunk (``choices: []``) when asked for.

        llama.cpp adds ``timings`` to the last chunk it sends.
        """
        chunks = [self.delta({}, finish)]
        if self.include_usage:
            chunks.append({**self.base, "choices": [], "usage": used})
        if self.with_timings:
            chunks[-1] = {
                **chunks[-1],
                "timings": timings(used["prompt_tokens"], used["completion_tokens"]),
            }
        return chunks


def stream_chunks(
    reply: Reply,
    model: str,
    prompt_tokens: int,
    include_usage: bool,
    *,
    with_timings: bool = False,
) -> Iterator[dict[str, Any]]:
    """``chat.completion.chunk`` objects for ``reply``, in the order OpenAI sends them.

    Text goes out word by word and tool arguments in pieces, so clients' delta accumulation
    is really exercised rather than handed everything in one chunk.
    """
    maker = ChunkMaker(model, include_usage, with_timings)
    yield maker.delta({"role": "assistant", "content": "", "refusal": None})
    for piece in text_pieces(reply.text):
        yield maker.delta({"content": piece})
    for i, call in enumerate(reply.tool_calls):
        yield maker.delta({"tool_calls": [_tool_call_json(i, call_id(), call.name, "")]})
        for start in range(0, len(call.arguments), 16):
            piece = call.arguments[start : start + 16]
            yield maker.delta({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield from maker.ending(_finish(reply, None), usage(prompt_tokens, reply))


def error_body(status: int, message: str | None) -> dict[str, Any]:
    """An OpenAI-style error object, which the SDK turns into its typed exceptions."""
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    text = message or f"scripted {status} {HTTPStatus(status).phrase}"
    return {"error": {"message": text, "type": kind, "param": None, "code": kind}}


def stream_error_event(message: str) -> dict[str, Any]:
    """The error llama.cpp sends as an SSE event inside an HTTP 200 stream."""
    return {"error": {"code": 500, "message": message, "type": "server_error"}}


def completion_id() -> str:
    """A fresh ``chatcmpl-...`` id."""
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def call_id() -> str:
    """A fresh ``call_...`` id."""
    return f"call_{uuid.uuid4().hex[:24]}"


def max_tokens(body: Mapping[str, Any]) -> int | None:
    """The request's completion limit (``max_completion_tokens`` or the older ``max_tokens``)."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def rambled(reply: Reply, limit: int | None) -> Reply:
    """The rule's text followed by filler words up to ``limit`` words (one word ~ one token)."""
    if limit is None:
        return reply
    words = (reply.text or "").split()
    while len(words) < limit:
        words.append(RAMBLE_WORDS[len(words) % len(RAMBLE_WORDS)])
    return replace(reply, text=" ".join(words[:limit]), tool_calls=())


def as_length(chunk: dict[str, Any]) -> dict[str, Any]:
    """A chunk whose ``stop`` finish becomes ``length`` (the answer was cut at max_tokens)."""
    for choice in chunk.get("choices") or []:
        if choice.get("finish_reason") == "stop":
            choice["finish_reason"] = "length"
    return chunk


def partial_then_error(maker: ChunkMaker, reply: Reply) -> Iterator[dict[str, Any]]:
    """The rule's text, then llama.cpp's in-stream error event; the stream ends without [DONE]."""
    yield maker.delta({"role": "assistant", "content": "", "refusal": None})
    for piece in text_pieces(reply.text):
        yield maker.delta({"content": piece})
    yield stream_error_event(reply.stream_error or "")


def endless(maker: ChunkMaker, text: str) -> Iterator[dict[str, Any]]:
    """A model with no ``max_tokens`` that never stops: words until the client hangs up."""
    yield maker.delta({"role": "assistant", "content": "", "refusal": None})
    for piece in text_pieces(text):
        yield maker.delta({"content": piece})
    i = 0
    while True:
        time.sleep(RAMBLE_INTERVAL)
        yield maker.delta({"content": f" {RAMBLE_WORDS[i % len(RAMBLE_WORDS)]}"})
        i += 1


def padded_text(text: str, limit: int) -> str:
    """``text`` and then newlines up to ``limit`` tokens (as :func:`tokens` counts them)."""
    return text + "\n" * max(0, 4 * limit - 3 - len(text))


def padded(
    maker: ChunkMaker, reply: Reply, prompt_tokens: int, limit: int
) -> Iterator[dict[str, Any]]:
    """The answer word by word, then one newline per chunk until ``limit`` completion tokens,
    finish "length" (llama.cpp with a small model after a tool call written as text)."""
    yield maker.delta({"role": "assistant", "content": "", "refusal": None})
    text = reply.text or ""
    for piece in text_pieces(text):
        yield maker.delta({"content": piece})
    for _ in range(max(0, limit - tokens(text))):
        yield maker.delta({"content": "\n"})
    used = {"prompt_tokens": prompt_tokens, "completion_tokens": limit}
    used["total_tokens"] = prompt_tokens + limit
    yield from maker.ending("length", used)
