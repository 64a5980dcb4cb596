"""The framework's idle timers an agent process does without under lk-eval's console.

Runs in the agent process (loaded by ``agent_host.py`` by file path, so it imports nothing from
lk-eval). Why: an agent under lk-eval is one console job in one process, with no LiveKit server
and no pool of idle processes, yet the framework's server keeps two timers made for a server
that hosts many jobs, about a third of what an agent spends while it merely waits
(``docs/protocol.md``, "The framework's idle timers", ``bench/idle_cpu.py``):

- *the process pool's poll* (``ProcPool._main_task``): every 0.1 s it tops the pool up to its
  idle-process target. The console's server runs in development mode, where that target is 0,
  and the load report (the only thing that changes the target) can only lower it; a job that
  needs a process spawns one itself (``ProcPool._acquire_proc``). With no idle target the poll
  is replaced by a task that only waits to be cancelled and then closes the pool exactly as the
  poll's own cancellation does (its executors, close and monitor tasks): shutdown, the job's
  crash detection (``_monitor_process_task``) and its timeouts are untouched.
- *the load report* (``AgentServer.run``'s ``load_task``, every 0.5 s, and the
  ``worker_cpu_load_monitor`` thread it starts, which samples the CPU every 0.5 s): the load
  goes to the LiveKit server a registered worker tells about its availability (the console's is
  unregistered), to Prometheus, and into the idle target above (only when a load threshold is
  set; development mode's is infinite). Stopped, before its first tick, only when none of those
  applies and the load function is the framework's own (a user's runs as before).

- *the event-loop monitor, while the agent is held* (1.8 and later: a tick on the job's loop and
  a watchdog thread, every 50 ms at lk-eval's ``LIVEKIT_AGENTS_LOOP_BLOCK_WARN_MS``): stopped
  once the agent says ``prepared`` and started again, as it was, when ``go`` comes
  (:func:`pause_loop_monitor`). Held, nothing of the agent's runs on that loop: its session
  waits. Set-up before ``prepared`` and the whole conversation are watched as before.

What stays: the job's ping (every 2.5 s, it notices a job whose loop hangs), the monitor's
warnings, and lk-eval's own watch on the agent's control channel.

Pinned, like ``tool_schemas``, to the functions it replaces or stops (``pins.py``), each by
the digest of its source as read in livekit-agents 1.6.6 and 1.8.9 (:data:`VERIFIED`: the
pool's ``ProcPool._main_task`` and the ``_load_task`` that ``AgentServer.run`` starts;
:data:`VERIFIED_MONITOR`: the monitor's ``get_monitor``, ``start_monitoring`` and
``stop_monitoring``): where one changed it changes nothing, the framework's own timers run, and
the run's start says which.
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import Awaitable, Callable
from typing import Any

try:  # imported as lkeval.host.idle_timers (tests, type checks)
    from . import pins
except ImportError:  # loaded by path in the agent's interpreter, by the host's loader
    pins = sys.modules["_lkeval_siblings"].sibling("pins")

#: :func:`pins.source_digest` of what the pool poll and load report cuts rely on, as read in the
#: releases CI installs (release -> function -> digest, oldest first).
VERIFIED: dict[str, dict[str, str]] = {
    "1.6.6": {
        "ProcPool._main_task": "2bff407d62d42086",
        "AgentServer.run._load_task": "1caf428960c6bc42",
    },
    "1.8.9": {
        "ProcPool._main_task": "2bff407d62d42086",
        "AgentServer.run._load_task": "1caf428960c6bc42",
    },
}
#: The same for the event-loop monitor (1.8 and later have one): :func:`pause_loop_monitor`
#: stops and starts it again through these functions.
VERIFIED_MONITOR: dict[str, dict[str, str]] = {
    "1.8.9": {
        "get_monitor": "395b9786adbe0692",
        "start_monitoring": "b21b83747a5ed037",
        "stop_monitoring": "fcc3eafae9713462",
    },
}
#: What :func:`install` can cut, as ``docs/protocol.md`` names them.
POOL_POLL = "process-pool poll"
LOAD_REPORT = "load report"


def check() -> Any:
    """Whether the pool's poll and the load report may be cut: a :class:`pins.Note`."""
    try:
        from livekit.agents.ipc.proc_pool import ProcPool
        from livekit.agents.worker import AgentServer

        poll: Any = ProcPool._main_task
        poll = getattr(poll, "_lkeval_original", poll)
        load_task = next(
            code
            for code in AgentServer.run.__code__.co_consts
            if getattr(code, "co_name", None) == "_load_task"
        )
    except (ImportError, AttributeError, StopIteration):
        return pins.Note(False, "no ProcPool._main_task or AgentServer.run's _load_task")
    functions = {"ProcPool._main_task": poll, "AgentServer.run._load_task": load_task}
    return pins.check(functions, VERIFIED)


def check_monitor() -> Any:
    """Whether the event-loop monitor may be paused while the agent is held."""
    try:
        from livekit.agents.telemetry import loop_monitor
    except ImportError:
        return pins.Note(False, "this livekit-agents has no event-loop monitor")
    names = ("get_monitor", "start_monitoring", "stop_monitoring")
    try:
        functions = {name: getattr(loop_monitor, name) for name in names}
    except AttributeError:
        return pins.Note(False, "the event-loop monitor has none of its functions")
    return pins.check(functions, VERIFIED_MONITOR)


def install(server: Any) -> tuple[str, ...]:
    """Cut the timers ``server`` (the agent's ``AgentServer``, not yet running) does without;
    returns what may be cut (:data:`POOL_POLL`, :data:`LOAD_REPORT`), empty on another release.

    The pool's poll is decided when the pool starts (its idle target), the load report when the
    server has started (its load function, threshold, registration and Prometheus settings).
    """
    if not check().on:
        return ()
    from livekit.agents.ipc.proc_pool import ProcPool

    if not getattr(ProcPool._main_task, "_lkeval_quiet", False):
        ProcPool._main_task = quiet_pool(ProcPool._main_task)  # type: ignore[method-assign,assignment]
    server.once("worker_started", lambda: stop_load_report(server))
    return (POOL_POLL, LOAD_REPORT)


def quiet_pool(poll: Callable[[Any], Awaitable[None]]) -> Callable[[Any], Awaitable[None]]:
    """``ProcPool._main_task`` that polls only when the pool keeps idle processes."""
    from livekit.agents.log import logger
    from livekit.agents.utils import aio, log_exceptions

    @log_exceptions(logger=logger)
    async def wait_for_close(self: Any) -> None:
        try:
            await asyncio.get_running_loop().create_future()  # ends when aclose cancels it
        except asyncio.CancelledError:  # what the poll does when cancelled (proc_pool.py)
            await aio.cancel_and_wait(*self._spawn_tasks)
            await asyncio.gather(*[proc.aclose() for proc in self._executors])
            await asyncio.gather(*self._close_tasks)
            await asyncio.gather(*self._monitor_tasks)

    async def _main_task(self: Any) -> None:
        if self._default_num_idle_processes > 0:
            await poll(self)
        else:
            await wait_for_close(self)

    _main_task._lkeval_quiet = True  # type: ignore[attr-defined]
    _main_task._lkeval_original = poll  # type: ignore[attr-defined]
    return _main_task


def load_report_needed(server: Any) -> bool:
    """Whether anything reads the load ``server``'s ``load_task`` measures (see the module's
    docstring): a LiveKit connection, Prometheus, a load threshold, or a user's load function."""
    from livekit.agents.worker import ServerEnvOption, _DefaultLoadCalc

    threshold = ServerEnvOption.getvalue(server._load_threshold, server._devmode)
    return bool(
        server._conn_task is not None
        or server._prometheus_server is not None
        or server._prometheus_multiproc_dir
        or not math.isinf(threshold)
        or server._load_fnc != _DefaultLoadCalc.get_load
    )


def stop_load_report(server: Any) -> bool:
    """Cancel ``server``'s load task before its first tick when nothing reads it (it then never
    starts the CPU monitor thread); True when cancelled. Any surprise leaves it running."""
    try:
        task = server._load_task
        if task is None or task.done() or load_report_needed(server):
            return False
        return bool(task.cancel())
    except Exception:  # a server unlike the one read: keep the framework's own behaviour
        return False


def pause_loop_monitor() -> Callable[[], None]:
    """Stop the running loop's event-loop monitor while the agent is held; returns what
    starts it again (call it on the same loop, before the session starts).

    Held, the job's loop runs nothing of the agent's (its session waits for ``go``), yet the
    monitor's tick and watchdog wake every 50 ms. The stop is scheduled behind any tick already
    due, so a block that ended just before (the entrypoint's own set-up) is still reported;
    the monitor started again has the same thresholds, name and report context (the job's).
    """
    try:
        from livekit.agents.telemetry import loop_monitor
    except ImportError:  # before 1.8: no monitor
        return _nothing
    loop = asyncio.get_running_loop()
    monitor = loop_monitor.get_monitor(loop)
    if monitor is None or not check_monitor().on:
        return _nothing
    paused: list[bool] = []

    def pause() -> None:
        if loop_monitor.get_monitor(loop) is monitor:
            loop_monitor.stop_monitoring(loop)
            paused.append(True)

    # a timer due now runs after every timer due earlier: the pending tick goes first
    stopping = loop.call_later(0, pause)

    def resume() -> None:
        stopping.cancel()
        if not paused or loop_monitor.get_monitor(loop) is not None:
            return
        thresholds = loop_monitor.LoopMonitorThresholds(
            warn=monitor.warn_threshold, error=monitor.error_threshold
        )
        again = loop_monitor.start_monitoring(
            loop, thresholds=thresholds, name=monitor._name, emit_spans=monitor._emit_spans
        )
        if again is not None:
            again.set_report_context(monitor._report_context)

    return resume


def _nothing() -> None:
    """The resume of a monitor that was not paused."""


if __name__ == "__main__":  # print this livekit-agents' notes (digests: pins.py)
    print(check().describe(), check_monitor().describe(), file=sys.stdout)
