"""Twenty recorded conversations replayed from cold starts: the cold half of
test_e2e_replay.py's twenty replays, in a module of its own so that the two halves (each 20
agent boots per run) run on two xdist workers instead of one after the other."""

from __future__ import annotations

from pathlib import Path

import pytest
from replay_agent import replay_twenty

pytestmark = pytest.mark.e2e


def test_twenty_replays_are_byte_identical_at_concurrency_1_and_4_cold(tmp_path: Path) -> None:
    """20 cold boots one after another take ~1 min on a quiet machine: the dearest replay."""
    replay_twenty(
        tmp_path,
        [["--concurrency", "1", "--cold-start"], ["--concurrency", "4", "--cold-start"]],
    )
