"""The run's memory as a whole (issue 30.4): inside a memory cgroup of 4 GiB, made here, a run
of agents that hold 300 MiB each at ``--concurrency 16`` (16 of them would need ~6 GiB), each
talking 30 s, finishes with every result and no OOM kill, because lk-eval admits agents only
while they fit in its stated share of what the cgroup has free; and it says in its first lines
what bounded it. On the code before, the kernel's OOM killer ended agents mid-run (and the
error brake then stopped the rest).

Needs root and a memory controller; where a cgroup cannot be made the test says why by name
(a skip with the reason), never passes silently. Slow (~2 min): ``exhaustive``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import TEST_AGENTS, clean_env, run_argv, run_lkeval
from memory_cgroup import memory_cgroup, why_no_cgroup

pytestmark = [pytest.mark.e2e, pytest.mark.exhaustive]

HEAVY = TEST_AGENTS / "held_agent.py"  # with HOLD_MIB: an agent that loads a model
SCENARIOS = 16
TIMEOUT = 1200


def _scenarios(tmp_path: Path, count: int) -> Path:
    turn = {"user": "hello", "expect": [{"message": {"contains": "You said"}}]}
    scenarios = [{"id": f"h{i}", "label": f"Heavy {i}", "turns": [turn]} for i in range(count)]
    path = tmp_path / "heavy.yaml"
    path.write_text(yaml.safe_dump({"name": "Heavy", "scenarios": scenarios}))
    return path


def test_a_run_in_a_4_gib_cgroup_admits_agents_while_they_fit_and_loses_no_result(
    tmp_path: Path,
) -> None:
    why = why_no_cgroup()
    if why is not None:
        pytest.skip(f"cannot make a memory cgroup here: {why}")
    results = tmp_path / "out" / "results.json"
    argv = [*run_argv(HEAVY, _scenarios(tmp_path, SCENARIOS), results)]
    argv += ["--concurrency", str(SCENARIOS), "--boot-timeout", "240", "--turn-timeout", "240"]
    # each conversation lasts a few seconds, so agents live side by side as they boot
    env = clean_env(OPENAI_API_KEY="k", HOLD_MIB="300", HOLD_REPLY_SECONDS="30")
    with memory_cgroup(4096) as cgroup:
        proc = run_lkeval(argv, env, TIMEOUT, before=cgroup.join)
        oom_kills, peak = cgroup.oom_kills(), cgroup.peak_mib()
    assert oom_kills == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    (bound,) = [line for line in lines[:6] if line.startswith("memory: agents together up to")]
    assert "the memory cgroup's memory" in bound, bound  # the cgroup bounded it, not the host
    (summary,) = [line for line in lines if line.startswith("memory: at most ")]
    at_once = int(summary.split()[3])
    assert 1 < at_once < SCENARIOS, summary
    data = json.loads(results.read_text())
    assert [s["status"] for s in data["scenarios"]] == ["passed"] * SCENARIOS
    print(f"{bound}\n{summary}\ncgroup peak {peak} MiB")


def test_an_agent_the_oom_killer_ends_anyway_is_an_error_that_says_so(tmp_path: Path) -> None:
    """One agent that holds more than the cgroup has (the plan admits the first agent whatever
    it costs: nothing has measured it yet): the kernel kills it, and its scenario's error
    says the OOM killer did, not a bare SIGKILL."""
    why = why_no_cgroup()
    if why is not None:
        pytest.skip(f"cannot make a memory cgroup here: {why}")
    results = tmp_path / "out" / "results.json"
    argv = [*run_argv(HEAVY, _scenarios(tmp_path, 1), results), "--agent-memory", "0"]
    env = clean_env(OPENAI_API_KEY="k", HOLD_MIB="1500")
    with memory_cgroup(1024) as cgroup:
        proc = run_lkeval(argv, env, TIMEOUT, before=cgroup.join)
        oom_kills = cgroup.oom_kills()
    assert oom_kills >= 1, proc.stdout + proc.stderr
    assert proc.returncode == 3, proc.stdout + proc.stderr  # nothing could run
    (scenario,) = json.loads(results.read_text())["scenarios"]
    assert scenario["status"] == "error"
    assert "killed by the kernel's OOM killer" in scenario["reason"], scenario["reason"]
