"""``StartingLauncher.pending``: whether taking the launcher would wait (lk-eval uses that
wait to load its price table; see ``lkeval.run.suite``)."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

from lkeval.agents.launch import StartingLauncher


def _starting(server: Any) -> StartingLauncher:
    return StartingLauncher(sys.executable, server)


def test_a_cold_launcher_never_waits() -> None:
    assert not StartingLauncher(sys.executable, None, "--cold-start").pending()


def test_a_preloading_fork_server_is_pending_and_a_ready_one_is_not() -> None:
    assert _starting(SimpleNamespace(preloading=True)).pending()
    assert not _starting(SimpleNamespace(preloading=False)).pending()


def test_a_taken_or_cancelled_launcher_is_not_pending() -> None:
    killed: list[bool] = []
    starting = _starting(SimpleNamespace(preloading=True, kill=lambda: killed.append(True)))
    starting.cancel()
    assert killed == [True]
    assert not starting.pending()
