"""``lkeval run`` loads the price table while it waits for the fork server, and only then.

The table's first load (genai-prices and pydantic, ~0.45 CPU-s in a process without the
OpenAI SDK) otherwise lands on the event loop at the first priced usage, mid-run; while the
fork server preloads, this process would sit idle. A launcher that is ready (or cold) is taken
at once: nothing is loaded ahead then, the engine starts without delay.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from lkeval.run import suite as suite_module
from lkeval.run.plan import SuiteSettings
from lkeval.run.suite import Collaborators, Suite


class _Taken(Exception):
    """The launcher was taken: the test stops the run there."""


class _Starting:
    def __init__(self, pending: bool, events: list[str]) -> None:
        self._pending, self.events = pending, events

    def pending(self) -> bool:
        return self._pending

    def result(self) -> Any:
        self.events.append("launcher taken")
        raise _Taken


@pytest.mark.parametrize(("pending", "expected"), [
    (True, ["price table loaded", "launcher taken"]),
    (False, ["launcher taken"]),
])  # fmt: skip
def test_the_price_table_is_loaded_only_while_the_fork_server_preloads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pending: bool, expected: list[str]
) -> None:
    events: list[str] = []
    monkeypatch.setattr(
        suite_module, "warm_price_table", lambda: events.append("price table loaded")
    )
    settings = SuiteSettings("agent.py", (), tmp_path / "results.json", tmp_path / "logs")
    parts = Collaborators(evaluator=lambda *_: None, progress=lambda _: None, writers=None)  # type: ignore[arg-type,return-value]
    suite = Suite(settings, parts, io.StringIO())
    raw_logs = tmp_path / "raw"
    raw_logs.mkdir()
    with pytest.raises(_Taken):
        suite.execute(None, None, _Starting(pending, events), raw_logs)  # type: ignore[arg-type]
    assert events == expected
