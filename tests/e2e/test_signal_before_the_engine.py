"""A signal while lk-eval is still getting ready, before its engine runs (issue 19.4, where a
Ctrl-C was once lost): the judge preflight, the fork server's start. Each phase twice per
signal; the run ends 130/143 with what it has. The phases of the engine itself are
test_signal_in_the_engine.py; the shared half is tests/held_run.py.

Also here: the fork server starts before the judge preflight (issue 20.4), and a failed
preflight stops it.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest
from conftest import alive, clean_env, lkeval_process, run_argv
from held_run import (
    BEFORE_THE_ENGINE,
    HELD,
    JUDGE,
    SIGNALS,
    fork_server_python,
    held_scenarios,
    signal_in_phase,
)

from lkeval.testing.llm_server import LLMServer

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="walks /proc"),
]

ROUNDS = [(p, r) for p in BEFORE_THE_ENGINE for r in (1, 2)]


@pytest.mark.parametrize("how", SIGNALS, ids=lambda s: s.name)
@pytest.mark.parametrize(("phase", "rounds"), ROUNDS, ids=[f"{p}-round{r}" for p, r in ROUNDS])
def test_a_signal_before_the_engine_ends_the_run_with_what_it_has(
    tmp_path: Path, phase: str, how: signal.Signals, rounds: int
) -> None:
    signal_in_phase(tmp_path, phase, how)


# --- the fork server starts before the judge preflight (issue 20.4) -------------------------


def test_a_failed_preflight_stops_the_preloading_fork_server_and_boots_nothing(
    tmp_path: Path,
) -> None:
    """The fork server preloads while the judge preflight runs; the judge then fails (its
    connection dropped unanswered): exit 2 in one line, the fork server gone with lk-eval,
    no agent booted, nothing left in TMPDIR."""
    tmpdir, mark = tmp_path / "tmp", tmp_path / "fork.mark"
    tmpdir.mkdir()
    results = tmp_path / "out" / "results.json"
    argv = [*run_argv(HELD, held_scenarios(tmp_path), results), "--judge-model", JUDGE]
    argv += ["--python", str(fork_server_python(tmp_path, "FORK_MARK"))]
    llm = LLMServer([{"model": JUDGE, "hang": True}]).start()
    env = clean_env(
        OPENAI_BASE_URL=llm.base_url,
        OPENAI_API_KEY="k",
        TMPDIR=str(tmpdir),
        FORK_MARK=str(mark),
        LKEVAL_LLM_RETRIES="0",
    )
    with lkeval_process(argv, env) as cli:
        try:
            deadline = time.monotonic() + 180
            # the preflight is under way and the fork server has started: both at once
            while not (llm.requests and mark.exists() and mark.read_text().strip()):
                assert cli.poll() is None, cli.communicate()
                assert time.monotonic() < deadline, "no preflight with a fork server starting"
                time.sleep(0.05)
            fork_server = int(mark.read_text())
            assert fork_server in alive({fork_server})
        finally:
            llm.stop()  # the judge's hanging asks are dropped unanswered: the preflight fails
        out, err = cli.communicate(timeout=90)
    assert cli.returncode == 2, out + err
    assert err.startswith("lk-eval: judge preflight: no verdict"), err
    assert len(err.splitlines()) == 1, err
    assert "warm starts" not in out and "[1/1]" not in out, out  # no launcher taken, no boot
    assert {r.body.get("model") for r in llm.requests} == {JUDGE}
    assert not results.exists()
    assert not alive({fork_server}), "the fork server outlived lk-eval"  # stopped, not left
    assert list(tmpdir.iterdir()) == [], "temp files left behind"
    agent_files = list((results.parent / "logs").glob("*")) if results.parent.exists() else []
    assert agent_files == [], agent_files
