"""The framework's idle timers lk-eval cuts in an agent process (lkeval/host/idle_timers.py,
docs/agent-timers.md): cut in a real agent, and nothing lk-eval relies on changed with them.

A real agent (tests/agents/timers_agent.py) reports from inside its process which timers run;
the same agent, made to crash, is still found crashed, and stopped, still ends gracefully.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import pytest
from agent_session import booted, run
from conftest import TEST_AGENTS

from lkeval.host import idle_timers

pytestmark = pytest.mark.e2e

TIMERS = TEST_AGENTS / "timers_agent.py"
ENV = {"OPENAI_API_KEY": "k"}


def test_the_pool_poll_and_load_report_are_cut_and_the_agent_still_ends_cleanly(
    tmp_path: Path,
) -> None:
    async def scenario() -> tuple[dict[str, object], int | None]:
        async with booted(TIMERS, tmp_path, ENV) as b:
            reply = await b.say("which timers run?")
            assert not reply.error
            seen = json.loads(b.messages()[-1])
            proc = b.agent.proc
        return seen, proc.returncode if proc else None

    seen, returncode = run(scenario())
    assert idle_timers.check().on  # this release is pinned
    assert "quiet_pool" in str(seen["pool_coroutine"]) and seen["pool_done"] is False
    assert seen["load_task_cancelled"] is True
    assert "worker_cpu_load_monitor" not in seen["threads"]  # started by the first load tick
    # kept: the job's own thread and its event-loop monitor (its warnings are the agent's)
    assert "job_thread_runner" in seen["threads"]
    if importlib.util.find_spec("livekit.agents.telemetry.loop_monitor") is not None:  # 1.8+
        assert "livekit-loop-monitor-job" in seen["threads"]
    # SIGTERM ended it through the server's own shutdown (the pool closed its job), not SIGKILL
    assert returncode == 0


def test_a_job_that_crashes_with_the_timers_cut_is_still_found_crashed(tmp_path: Path) -> None:
    async def scenario() -> str:
        async with booted(TIMERS, tmp_path, ENV, userdata={"crash": True}) as b:
            return await asyncio.wait_for(b.agent.wait_failure(), 60)

    reason = run(scenario())
    assert "job crashed" in reason and "crashed on purpose" in reason
