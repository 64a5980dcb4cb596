"""What tokens cost: a maintained price table (``genai-prices``) plus the user's overrides.

A hand-written table goes stale within months and silently under-reports; ``genai-prices``
(pydantic's, updated with each provider change, bundled data, no network at run time) knows
the models of OpenAI, Anthropic, Google, Groq, Mistral and more. ``--price MODEL=IN,OUT``
wins over it (a negotiated rate, a self-hosted model). A model neither knows stays *unpriced*:
reports say so, and a cost budget is never checked against a sum that leaves it out. A table
price of zero for both input and output is a free tier of the provider the table names
(genai-prices lists ``google/gemma-*`` at $0, while LiveKit Inference bills them), not what the
user pays: it counts as unknown too, and ``--price MODEL=0,0`` says a model really is free. So
do tokens a server did not report: a call whose usage is unknown costs "unpriced", never $0.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

from lkeval.results.model import Usage

Price = tuple[float, float]  # USD per 1M input tokens, per 1M output tokens


def parse_price_override(text: str) -> tuple[str, Price]:
    """``"gpt-4.1-mini=0.4,1.6"`` -> ``("gpt-4.1-mini", (0.4, 1.6))``; ValueError says why."""
    model, sep, rates = text.partition("=")
    parts = [p.strip() for p in rates.split(",")]
    try:
        if not sep or not model.strip() or len(parts) != 2:
            raise ValueError
        price = float(parts[0]), float(parts[1])
    except ValueError:
        raise ValueError(
            f"{text!r} is not MODEL=IN,OUT (USD per 1M input and output tokens, "
            "e.g. gpt-4.1-mini=0.4,1.6)"
        ) from None
    if price[0] < 0 or price[1] < 0:
        raise ValueError(f"{text!r}: a price cannot be negative")
    return model.strip(), price


@functools.lru_cache(maxsize=256)
def table_price(model: str) -> Price | None:
    """The list price of ``model`` from genai-prices (``provider/model`` accepted), or None;
    None too for a price of zero in and out (a provider's free tier, see the module docstring)."""
    from genai_prices import Usage as PriceUsage
    from genai_prices import calc_price

    provider, _, name = model.rpartition("/")
    probe = PriceUsage(input_tokens=1_000_000, output_tokens=1_000_000)
    for ref, provider_id in ((name, provider or None), (name, None), (model, None)):
        try:
            found = calc_price(probe, model_ref=ref, provider_id=provider_id)
        except (LookupError, ValueError):
            continue
        price = float(found.input_price), float(found.output_price)
        return None if price == (0.0, 0.0) else price
    return None


#: The model :func:`warm_price_table` looks up (any name loads the whole table).
_WARM_MODEL = "gpt-4.1-mini"


def warm_price_table() -> None:
    """Load genai-prices' table now, for a caller that would otherwise wait idle.

    Its first use imports genai-prices and pydantic and builds the table: ~0.45 CPU-s in an
    lk-eval process that has not loaded the OpenAI SDK (a run with no judge or caller, a
    replayed run). Left to the first priced usage, that lands on the event loop mid-run,
    stalling every conversation in flight; ``lkeval run`` calls this while the fork server
    preloads on the other core, so later look-ups cost ~1 ms. A table that cannot be loaded
    is left to fail where prices are asked, as it would without this.
    """
    with contextlib.suppress(Exception):
        table_price(_WARM_MODEL)


@dataclass(frozen=True)
class PriceTable:
    """Prices by model name: the user's overrides first, then genai-prices."""

    overrides: Mapping[str, Price] = field(default_factory=dict)

    def price(self, model: str) -> Price | None:
        """USD per 1M (input, output) tokens of ``model``, or None when unknown."""
        for name in (model, model.rpartition("/")[2]):
            if name in self.overrides:
                return self.overrides[name]
        return table_price(model) if model else None

    def usage(self, model: str, input_tokens: int, output_tokens: int) -> Usage:
        """The tokens of one model, priced when its price is known, else marked unpriced."""
        name = model or "unknown model"
        price = self.price(model)
        if price is None:
            return Usage(input_tokens, output_tokens, None, (name,), (name,))
        cost = (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000
        return Usage(input_tokens, output_tokens, cost, (name,))


def total_cost(usage: Mapping[str, Usage]) -> tuple[float | None, tuple[str, ...]]:
    """Cost over all parties and the models left unpriced (cost None when nothing was priced)."""
    cost: float | None = None
    unpriced: list[str] = []
    for part in usage.values():
        if part.cost_usd is not None:
            cost = (cost or 0.0) + part.cost_usd
        unpriced += [m for m in part.unpriced if m not in unpriced]
        tokens = part.input_tokens + part.output_tokens
        if part.cost_usd is None and not part.unpriced and not part.unreported and tokens:
            unpriced.append("unknown model")  # a results file from before model names
    unreported = sum(part.unreported for part in usage.values())
    if unreported:
        unpriced.append(f"{unreported} call(s) whose usage the server did not report")
    return cost, tuple(dict.fromkeys(unpriced))


def format_cost(cost: float | None, unpriced: tuple[str, ...] = ()) -> str:
    """``$0.0123``, ``unpriced``, or ``$0.0123 + unpriced (model)``: never a silent $0."""
    if cost is None:
        return "unpriced"
    text = f"${cost:.4f}" if cost < 1 else f"${cost:.2f}"
    if unpriced:
        text += f" + unpriced ({', '.join(unpriced)})"
    return text
