"""The idle timers cut in the agent process (lkeval/host/idle_timers.py): the process pool's
poll and the load report go only where nothing needs them, the pool still closes what it ran,
and on a release whose files were not read nothing changes."""

from __future__ import annotations

import asyncio
import contextvars
import math
import multiprocessing
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
from livekit.agents import AgentServer, JobContext
from livekit.agents.ipc.proc_pool import ProcPool
from livekit.agents.job import JobExecutorType
from livekit.agents.worker import ServerEnvOption, _DefaultLoadCalc

from lkeval.host import idle_timers


@pytest.mark.smoke
def test_this_livekit_agents_is_one_whose_timers_were_read() -> None:
    assert idle_timers.check().on


def test_another_release_keeps_every_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(idle_timers, "VERIFIED", {"0.0.0": {"ProcPool._main_task": "other"}})
    poll = ProcPool._main_task
    server = SimpleNamespace(once=lambda *_: pytest.fail("hooked a server it did not read"))
    assert idle_timers.install(server) == ()
    assert ProcPool._main_task is poll


async def _pool_life(idle: int) -> tuple[list[float], list[str]]:
    """Start a pool keeping ``idle`` processes, let it run some loop turns, close it: the
    sleeps its main task asked for, and what it spawned and closed."""
    happened: list[str] = []
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(delay: float, *args: Any) -> Any:
        slept.append(delay)
        return await real_sleep(0, *args)

    async def entrypoint(ctx: JobContext) -> None:
        pass

    pool = ProcPool(
        initialize_process_fnc=lambda proc: None,
        job_entrypoint_fnc=entrypoint,
        session_end_fnc=None,
        simulation_end_fnc=None,
        num_idle_processes=idle,
        initialize_timeout=10,
        close_timeout=10,
        session_end_timeout=10,
        inference_executor=None,
        job_executor_type=JobExecutorType.THREAD,
        mp_ctx=multiprocessing.get_context(),
        memory_warn_mb=0,
        memory_limit_mb=0,
        http_proxy=None,
        loop=asyncio.get_running_loop(),
    )

    async def spawn() -> None:
        happened.append("spawned")
        pool._idle_ready.set()

    class Executor:
        async def aclose(self) -> None:
            happened.append("executor closed")

    pool._proc_spawn_task = spawn  # type: ignore[method-assign]
    pool._executors.append(Executor())  # type: ignore[arg-type]
    asyncio.sleep = sleep  # type: ignore[assignment]
    try:
        await pool.start()
        for _ in range(5):
            await real_sleep(0)
    finally:
        asyncio.sleep = real_sleep
    await pool.aclose()
    return slept, happened


@pytest.fixture
def quiet_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ProcPool, "_main_task", idle_timers.quiet_pool(ProcPool._main_task))


def test_a_pool_with_no_idle_target_does_not_poll_and_still_closes_its_executors(
    quiet_pool: None,
) -> None:
    slept, happened = asyncio.run(_pool_life(idle=0))
    assert 0.1 not in slept  # the framework's poll sleeps 0.1 s per turn
    assert happened == ["executor closed"]  # what the poll's cancellation does, done


def test_the_framework_pool_polls_and_closes_the_same_way() -> None:
    slept, happened = asyncio.run(_pool_life(idle=0))
    assert 0.1 in slept  # what the cut removes
    assert happened == ["executor closed"]


def test_a_pool_that_keeps_idle_processes_polls_as_before(quiet_pool: None) -> None:
    slept, happened = asyncio.run(_pool_life(idle=1))
    assert 0.1 in slept  # the framework's own poll, as before
    assert happened[0] == "spawned" and happened[-1] == "executor closed"


def _console_server(**changes: Any) -> SimpleNamespace:
    """What ``AgentServer.run`` leaves on a console's server (development mode, unregistered)."""
    base: dict[str, Any] = {
        "_load_threshold": ServerEnvOption(dev_default=math.inf, prod_default=0.7),
        "_devmode": True,
        "_conn_task": None,
        "_prometheus_server": None,
        "_prometheus_multiproc_dir": None,
        "_load_fnc": _DefaultLoadCalc.get_load,
    }
    return SimpleNamespace(**(base | changes))


@pytest.mark.parametrize(
    "changes",
    [
        {"_conn_task": object()},  # registered with LiveKit: its load is the availability
        {"_prometheus_server": object()},
        {"_prometheus_multiproc_dir": "/tmp/prom"},
        {"_load_threshold": 0.7},  # the load sets the pool's idle target
        {"_devmode": False},  # production's threshold (0.7)
        {"_load_fnc": lambda: 0.5},  # the user's own load function keeps running
    ],
)
def test_the_load_report_stays_where_something_reads_it(changes: dict[str, Any]) -> None:
    assert not idle_timers.load_report_needed(_console_server())
    assert idle_timers.load_report_needed(_console_server(**changes))


def test_a_console_server_starts_without_its_load_task_and_closes() -> None:
    async def scenario() -> tuple[bool, bool]:
        server = AgentServer(job_executor_type=JobExecutorType.THREAD)

        @server.rtc_session()
        async def entrypoint(ctx: JobContext) -> None:
            pass

        assert idle_timers.install(server) == (idle_timers.POOL_POLL, idle_timers.LOAD_REPORT)
        started = asyncio.Event()
        server.on("worker_started", started.set)
        running = asyncio.create_task(server.run(devmode=True, unregistered=True))
        await asyncio.wait_for(started.wait(), 30)
        load_task = server._load_task
        pool_quiet = getattr(ProcPool._main_task, "_lkeval_quiet", False)
        await server.aclose()
        await asyncio.wait_for(running, 30)
        return load_task is not None and load_task.cancelled(), pool_quiet

    try:
        assert asyncio.run(scenario()) == (True, True)
    finally:
        ProcPool._main_task = ProcPool._main_task._lkeval_original  # type: ignore[attr-defined,method-assign]


def _monitor_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("livekit-loop-monitor-")]


def test_the_held_agents_loop_monitor_pauses_and_comes_back_as_it_was() -> None:
    loop_monitor = pytest.importorskip("livekit.agents.telemetry.loop_monitor")  # 1.8+

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        thresholds = loop_monitor.LoopMonitorThresholds(warn=0.25, error=0.5)
        before = loop_monitor.start_monitoring(loop, thresholds=thresholds, name="job")
        context = contextvars.copy_context()
        before.set_report_context(context)
        await asyncio.sleep(0.01)  # armed: its watchdog thread runs
        assert "livekit-loop-monitor-job" in _monitor_threads()
        resume = idle_timers.pause_loop_monitor()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert loop_monitor.get_monitor(loop) is None
        assert "livekit-loop-monitor-job" not in _monitor_threads()  # joined when stopped
        resume()
        after = loop_monitor.get_monitor(loop)
        assert after is not None and after is not before
        assert (after.warn_threshold, after.error_threshold) == (0.25, 0.5)
        assert after._name == "job" and after._report_context is context
        await asyncio.sleep(0.01)
        assert "livekit-loop-monitor-job" in _monitor_threads()
        loop_monitor.stop_monitoring(loop)

    asyncio.run(scenario())


def test_a_block_that_ends_as_the_agent_is_held_is_still_reported() -> None:
    loop_monitor = pytest.importorskip("livekit.agents.telemetry.loop_monitor")

    async def scenario() -> list[float]:
        loop = asyncio.get_running_loop()
        thresholds = loop_monitor.LoopMonitorThresholds(warn=0.1, error=0.5)
        monitor = loop_monitor.start_monitoring(loop, thresholds=thresholds, name="job")
        reports: list[float] = []
        monitor._on_report = lambda report: reports.append(report.duration)
        await asyncio.sleep(0.05)
        time.sleep(0.3)  # the entrypoint's set-up blocks the loop, then the session starts
        resume = idle_timers.pause_loop_monitor()
        for _ in range(3):
            await asyncio.sleep(0)
        assert loop_monitor.get_monitor(loop) is None  # paused, after the late tick reported
        resume()
        loop_monitor.stop_monitoring(loop)
        return reports

    assert len(asyncio.run(scenario())) == 1


def test_without_a_monitor_there_is_nothing_to_pause() -> None:
    async def scenario() -> None:
        resume = idle_timers.pause_loop_monitor()
        await asyncio.sleep(0)
        resume()

    asyncio.run(scenario())  # and 1.6.6, which has no monitor, runs as before
