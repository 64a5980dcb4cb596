"""Two runs, one results directory (issue 30.8): the second is refused, naming the first.

The first run is held in its judging (the judge never answers its verdict request), so it
holds its results directory; a second ``lkeval run`` into the same directory exits 2 naming the
first run's pid and command line, before its judge preflight (no LLM call), and writes nothing
there. Once the first one is stopped
(SIGTERM: its partial results written), the next run may use the directory again.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import pytest
from conftest import clean_env, lkeval_process, run_argv, run_lkeval
from held_run import HELD, JUDGE, _judge_rules, held_scenarios

from lkeval.errors import ExitCode
from lkeval.testing.llm_server import LLMServer

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="flock, /proc"),
]


def test_a_second_run_into_a_held_results_dir_is_refused_naming_the_first(
    tmp_path: Path,
) -> None:
    results = tmp_path / "out" / "results.json"
    argv = [*run_argv(HELD, held_scenarios(tmp_path), results), "--judge-model", JUDGE]
    with LLMServer(_judge_rules("judging")) as llm:
        env = clean_env(OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="k", HOLD_AT="judging")
        with lkeval_process([*argv, "--concurrency", "1"], env) as first:
            deadline = time.monotonic() + 180
            while not any("You said" in json.dumps(r.body) for r in llm.requests):
                assert first.poll() is None, first.communicate()
                assert time.monotonic() < deadline, "the first run never reached its judging"
                time.sleep(0.05)
            asked = len(llm.requests)
            second = run_lkeval([*argv, "--cold-start"], env)
            assert len(llm.requests) == asked, "refused only after its judge preflight"
            assert not results.exists(), "the second run wrote into the first one's directory"
            first.send_signal(signal.SIGTERM)
            first.communicate(timeout=90)
    assert second.returncode == ExitCode.USAGE, second.stdout + second.stderr
    refusal = [line for line in second.stderr.splitlines() if "another lkeval run" in line]
    assert refusal, second.stderr
    assert f"pid {first.pid}," in refusal[0] and "--judge-model held-judge" in refusal[0]
    assert first.returncode == 128 + signal.SIGTERM
    assert json.loads(results.read_text())["metadata"]["interrupted"] is True
    assert not (results.parent / ".lkeval.lock").exists(), "the lock goes with its run"
