"""A signal in each phase of lk-eval's engine and after it (issue 19.5): an agent booting, a
conversation, the judging, the writing of the results (GitHub holding the PR comment). Each
phase once per signal; the run ends 130/143 with what it has, nothing of lk-eval's left running
or in TMPDIR. The phases before the engine are test_signal_before_the_engine.py; the shared
half is tests/held_run.py.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest
from held_run import IN_THE_ENGINE, SIGNALS, signal_in_phase

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="walks /proc"),
]


@pytest.mark.parametrize("how", SIGNALS, ids=lambda s: s.name)
@pytest.mark.parametrize("phase", IN_THE_ENGINE)
def test_a_signal_in_the_engine_ends_the_run_with_what_it_has(
    tmp_path: Path, phase: str, how: signal.Signals
) -> None:
    signal_in_phase(tmp_path, phase, how)
