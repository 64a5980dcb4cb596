"""What replayed calls cost when they were recorded: taken off each party's cost (a replayed
call costs $0) and reported as ``saved_usd`` (docs/replay.md, "What is never replayed")."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from lkeval.host.tape import response_chunks
from lkeval.results.model import Usage
from lkeval.results.pricing import PriceTable


def recorded_cost(exchange: Mapping[str, Any], prices: PriceTable) -> float:
    """The cost of one recorded LLM call from the usage its response reported (0 when it
    reported none or its model has no price)."""
    model = ""
    body = exchange.get("request", {}).get("body", {})
    if isinstance(body.get("json"), dict):
        model = str(body["json"].get("model", ""))
    tokens = _usage_of(b"".join(response_chunks(exchange.get("response", {}))))
    if tokens is None or not model:
        return 0.0
    return prices.usage(model, *tokens).cost_usd or 0.0


def _usage_of(body: bytes) -> tuple[int, int] | None:
    """(prompt, completion) tokens of a chat completion, streamed (its usage chunk) or not."""
    text = body.decode("utf-8", errors="replace")
    candidates = [text] + [
        line[5:].strip() for line in text.splitlines() if line.startswith("data:")
    ]
    for candidate in reversed(candidates):
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            usage = json.loads(candidate).get("usage")
            if isinstance(usage, dict):
                return int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
    return None


def without_saved(usage: Mapping[str, Usage], saved: Mapping[str, float]) -> dict[str, Usage]:
    """Replayed calls cost $0: their recorded cost off each party's."""
    out = dict(usage)
    for party, amount in saved.items():
        have = out.get(party)
        if have is not None and have.cost_usd is not None:
            out[party] = dataclasses.replace(have, cost_usd=max(0.0, have.cost_usd - amount))
    return out


__all__ = ["recorded_cost", "without_saved"]
