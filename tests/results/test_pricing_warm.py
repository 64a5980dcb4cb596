"""The price table loaded ahead (``warm_price_table``): same prices, and never a new failure.

``lkeval run`` loads genai-prices while the fork server preloads (the process would wait idle)
instead of on the first priced usage, mid-run on the event loop.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lkeval.results import pricing
from lkeval.results.pricing import PriceTable, warm_price_table

PRICES = """
import json, sys
from lkeval.results.pricing import PriceTable, warm_price_table
if sys.argv[1] == "warm":
    warm_price_table()
    assert "genai_prices" in sys.modules
else:
    assert "genai_prices" not in sys.modules
table = PriceTable({"mine": (1.0, 2.0)})
models = ["gpt-4.1-mini", "openai/gpt-4o", "claude-3-5-sonnet-latest", "hotel-agent", "mine", ""]
print(json.dumps([repr(table.usage(m, 12345, 678)) for m in models]))
"""


def _usages(mode: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", PRICES, mode],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    usages: list[str] = json.loads(out)
    return usages


def test_a_warmed_table_prices_every_model_as_a_cold_one() -> None:
    cold, warm = _usages("cold"), _usages("warm")
    assert cold == warm
    assert "None" not in cold[0]  # gpt-4.1-mini is priced: the comparison compared prices
    assert "'hotel-agent'" in cold[3]  # and an unknown model stays unpriced either way


def test_a_table_that_cannot_load_fails_where_prices_are_asked_not_in_the_warm_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(model: str) -> tuple[float, float] | None:
        raise ImportError("genai_prices is broken")

    monkeypatch.setattr(pricing, "table_price", broken)
    warm_price_table()  # says nothing
    with pytest.raises(ImportError):
        PriceTable().price("gpt-4.1-mini")
