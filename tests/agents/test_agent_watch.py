"""What a live agent costs besides its own work: the watch every conversation races
(``AgentProcess.wait_failure``: it finds a crash line, a bound passed and an exit, with one
shared exit waiter per agent, not a task per poll) and the framework's loop monitor.

Each request of a conversation races this watch, so it runs for every live conversation the
whole time: at c=32 a task left behind per poll, or a file opened per poll, is CPU the agents
needed (issue 20.3). A real short-lived process stands in for the agent (no LiveKit here).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from lkeval.agents.limits import STOPPED, ResidentMemory, bound_passed
from lkeval.agents.process import (
    LOOP_MONITOR_ENV,
    LOOP_MONITOR_WARN_MS,
    AgentLaunch,
    AgentProcess,
    agent_env,
)

CRASH_LINE = b'{"message": "unhandled exception", "reason": "job crashed"}\n'


async def _watched(tmp_path: Path, log_limit_mib: int = 0) -> AgentProcess:
    """An AgentProcess whose process is ``sleep 30`` (its own group, as an agent is) and whose
    raw log is in ``tmp_path``."""
    launch = AgentLaunch(Path("agent.py"), log_limit_mib=log_limit_mib)
    agent = AgentProcess(launch, "{}", tmp_path / "a.log")
    agent.raw_log_path.write_bytes(b"starting worker\n")
    agent.proc = await asyncio.create_subprocess_exec("sleep", "30", start_new_session=True)
    return agent


async def _stop(agent: AgentProcess) -> None:
    assert agent.proc is not None
    if agent.proc.returncode is None:
        agent.proc.kill()
        await agent.proc.wait()


def test_a_crash_line_written_while_watched_is_found_and_stays_found(tmp_path: Path) -> None:
    async def main() -> tuple[str, str]:
        agent = await _watched(tmp_path)
        watch = asyncio.ensure_future(agent.wait_failure(poll=0.01))
        await asyncio.sleep(0.1)  # polled a few times: the log did not grow, nothing found
        assert not watch.done()
        with agent.raw_log_path.open("ab") as log:
            log.write(b"x" * 5000 + b"\n" + CRASH_LINE)
        first = await asyncio.wait_for(watch, 5)
        again = await asyncio.wait_for(agent.wait_failure(poll=0.01), 5)  # the log is unchanged
        await _stop(agent)
        return first, again

    first, again = asyncio.run(main())
    assert first.startswith("the agent's job crashed"), first
    assert again == first


def test_an_exit_ends_the_watch_at_once_with_its_reason(tmp_path: Path) -> None:
    async def main() -> str:
        agent = await _watched(tmp_path)
        watch = asyncio.ensure_future(agent.wait_failure(poll=30))  # no poll before the exit
        await asyncio.sleep(0.05)
        assert agent.proc is not None
        agent.proc.kill()
        return await asyncio.wait_for(watch, 5)

    assert asyncio.run(main()) == "agent process killed by signal SIGKILL"


def test_watching_leaves_no_task_behind_per_poll(tmp_path: Path) -> None:
    """Each poll used to leave a task waiting on the exit: ~10 per second per agent."""

    async def main() -> tuple[int, int]:
        agent = await _watched(tmp_path)
        watches = [asyncio.ensure_future(agent.wait_failure(poll=0.005)) for _ in range(3)]
        await asyncio.sleep(0.05)
        early = len(asyncio.all_tasks())
        await asyncio.sleep(0.3)  # ~60 polls per watch
        late = len(asyncio.all_tasks())
        for watch in watches:
            watch.cancel()
        await _stop(agent)
        return early, late

    early, late = asyncio.run(main())
    assert late == early, (early, late)


def test_a_log_past_its_bound_stops_the_agent(tmp_path: Path) -> None:
    async def main() -> tuple[str, int | None]:
        agent = await _watched(tmp_path, log_limit_mib=1)
        with agent.raw_log_path.open("ab") as log:
            log.write(b"y" * (1024 * 1024 + 1))
        reason = await asyncio.wait_for(agent.wait_failure(poll=0.01), 5)
        assert agent.proc is not None
        return reason, await asyncio.wait_for(agent.proc.wait(), 5)

    reason, returncode = asyncio.run(main())
    assert reason == f"{STOPPED}it wrote more than 1 MiB of log (--agent-log-limit)"
    assert returncode == -9  # its whole tree was killed


def test_resident_memory_reads_its_own_process_and_none_once_gone() -> None:
    memory = ResidentMemory(os.getpid())
    mib = memory.mib()
    assert mib is not None and 5 < mib < 10_000
    reason = bound_passed(memory, 0, 1, 0)
    assert reason is not None and reason.startswith(f"{STOPPED}it used ")
    assert reason.endswith("MiB of memory, more than its 1 MiB (--agent-memory)")
    assert bound_passed(memory, 10, 100_000, 1) is None
    assert bound_passed(memory, 2 * 1024 * 1024, 0, 1) is not None  # log bound, memory off
    memory.close()
    assert memory.mib() is None and bound_passed(memory, 0, 1, 0) is None
    assert ResidentMemory(2**22 + 12345).mib() is None  # no such process


def test_agents_get_a_slower_loop_monitor_unless_the_user_chose_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The framework's loop monitor at its default woke each agent 200 times a second; the
    user's own threshold (their environment, ``--env``) is kept as they set it."""
    # imported here: the module is newer than the oldest livekit-agents this file is collected
    # with (the 1.6.6 smoke collects every module)
    from livekit.agents.telemetry import loop_monitor

    monkeypatch.delenv(LOOP_MONITOR_ENV, raising=False)
    launch = AgentLaunch(Path("agent.py"))
    assert agent_env(launch)[LOOP_MONITOR_ENV] == LOOP_MONITOR_WARN_MS == "250"
    # what 250 ms means to the installed livekit-agents: its slowest tick, blocks still logged
    thresholds = loop_monitor.LoopMonitorThresholds.from_env()
    assert thresholds is not None and thresholds.warn == 0.1  # lk-eval's own env: untouched
    assert loop_monitor._tick_interval_for(0.25) == 0.05 > loop_monitor._tick_interval_for(0.1)
    monkeypatch.setenv(LOOP_MONITOR_ENV, "100")
    assert agent_env(launch)[LOOP_MONITOR_ENV] == "100"
    given = AgentLaunch(Path("agent.py"), env={LOOP_MONITOR_ENV: "0"})
    assert agent_env(given)[LOOP_MONITOR_ENV] == "0"
