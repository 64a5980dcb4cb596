"""The start-up's paused garbage collector (lkeval/startup.py): paused inside, restored after."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from lkeval.startup import paused_collections


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_paused_inside_and_back_on_after(collector_on: None) -> None:
    with paused_collections():
        assert not gc.isenabled()
        with paused_collections():  # nested: the inner one must not turn it back on
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_collector_is_back_on_after_an_error(collector_on: None) -> None:
    with pytest.raises(RuntimeError), paused_collections():
        raise RuntimeError("a failed preflight")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off(collector_on: None) -> None:
    gc.disable()
    with paused_collections():
        pass
    assert not gc.isenabled()
