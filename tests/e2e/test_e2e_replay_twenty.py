"""Twenty recorded conversations replayed byte-identical: forked (warm) at concurrency 1 and 4,
and four of them from cold starts at concurrency 4, all from one recording.

A module of its own (the suite's dearest test) so that xdist hands it out first and the other
worker runs the rest meanwhile. Cold starts replay four scenarios at concurrency 4 only: what is
cold about a replay (the tape installed by a fresh interpreter before the agent's module is
imported) is the same for each scenario, and four agents booting at once is all concurrency 4
can show (the other sixteen were 40 s of CPU, ~2.5 s per cold boot, and proved nothing more);
running them one at a time is what the warm replay at concurrency 1 checks, twenty replays in
one run what the warm ones check.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from replay_agent import replay_twenty

pytestmark = pytest.mark.e2e


def test_twenty_replays_are_byte_identical_warm_at_concurrency_1_and_4_and_four_cold(
    tmp_path: Path,
) -> None:
    cold = ["--concurrency", "4", "--cold-start", "--match", "check-0[0-3]"]
    replay_twenty(tmp_path, [["--concurrency", "1"], ["--concurrency", "4"], cold])


@pytest.mark.exhaustive
def test_twenty_replays_are_byte_identical_cold_at_concurrency_1_and_4(tmp_path: Path) -> None:
    """All twenty from cold starts, one at a time and four at once: replays are byte for byte
    (docs/replay.md) at concurrency 1 and 4, warm (above) and cold. ~100 CPU-s of cold boots,
    so CI runs it after ``make test`` (``make test-exhaustive``), not on every ``make test``."""
    cold = ["--cold-start", "--concurrency"]
    replay_twenty(tmp_path, [[*cold, "1"], [*cold, "4"]])
