"""lk-eval's fork server with every forked agent measured from inside (``bench/scenario_cpu.py``).

Run in place of ``lkeval/host/fork_server.py`` (same arguments). The real server is
``$SCENARIO_CPU_FORK_SERVER``. With ``$SCENARIO_CPU_PROFILE_DIR`` each child profiles every
thread on its own CPU clock (``time.thread_time``) and writes ``agent-PID.prof`` there; with
``$SCENARIO_CPU_MARKS_DIR`` it instead notes the process's CPU (``time.process_time``, all
threads) at the steps of its life (``MARKS`` below) and writes ``agent-PID.json``. Both are
written when the child leaves through ``os._exit``, as agents do. Bench only: nothing in
lk-eval loads this.
"""

from __future__ import annotations

import cProfile
import functools
import json
import os
import runpy
import sys
import threading
import time
from typing import Any

PROFILE_DIR = os.environ.get("SCENARIO_CPU_PROFILE_DIR")
MARKS_DIR = os.environ.get("SCENARIO_CPU_MARKS_DIR")
REAL = os.environ["SCENARIO_CPU_FORK_SERVER"]
_fork = os.fork
_exit = os._exit
_profiles: list[cProfile.Profile] = []
_marks: list[tuple[str, float]] = []


def mark(name: str) -> None:
    _marks.append((name, time.process_time()))


def _thread_hook(frame: Any, event: str, arg: Any) -> None:
    profile = cProfile.Profile(time.thread_time)
    _profiles.append(profile)
    profile.enable()  # replaces this hook in this thread


def _leave(code: int) -> None:
    try:
        mark("os._exit")
        if MARKS_DIR:
            with open(os.path.join(MARKS_DIR, f"agent-{os.getpid()}.json"), "w") as fh:
                json.dump(_marks, fh)
        if PROFILE_DIR:
            import pstats

            stats = None
            for profile in list(_profiles):
                profile.disable()
                stats = pstats.Stats(profile) if stats is None else stats.add(profile)
            if stats is not None:
                stats.dump_stats(os.path.join(PROFILE_DIR, f"agent-{os.getpid()}.prof"))
    finally:
        _exit(code)


def _wrap(owner: Any, name: str, before: str | None, after: str | None = None) -> None:
    original = getattr(owner, name)
    if hasattr(original, "__code__") and original.__code__.co_flags & 0x80:  # coroutine

        @functools.wraps(original)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            if before:
                mark(before)
            try:
                return await original(*args, **kwargs)
            finally:
                if after:
                    mark(after)

    else:

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if before:
                mark(before)
            try:
                return original(*args, **kwargs)
            finally:
                if after:
                    mark(after)

    setattr(owner, name, wrapper)


def _install_marks() -> None:
    """Before the host runs: wrap the steps of an agent's life (the host wraps some of them
    again later, outside ours: AgentSession.start's ours runs once "go" has come)."""
    from livekit.agents import AgentSession, __main__, worker
    from livekit.agents.cli import cli
    from livekit.agents.ipc import job_thread_executor, proc_pool

    host = sys.modules["_lkeval_agent_host"]
    _wrap(host, "main", "host main")
    _wrap(host, "forget_host_dir", "host set-up done")
    _wrap(__main__, "_discover_server", None, "user module imported")
    _wrap(cli, "setup_logging", None, "logging set up")
    _wrap(worker.AgentServer, "run", "server run")
    _wrap(worker.AgentServer, "simulate_job", "simulate job")
    _wrap(proc_pool.ProcPool, "launch_job", "job launch (scenario in)")
    _wrap(job_thread_executor.ThreadJobExecutor, "_main_task", "job thread task")
    _wrap(AgentSession, "__init__", "AgentSession() (entrypoint)")
    import ssl

    from livekit.agents import job
    from livekit.plugins import openai

    _wrap(job.JobContext, "__init__", "JobContext()")
    _wrap(openai.LLM, "__init__", "openai.LLM() (entrypoint)", "openai.LLM() built")
    _wrap(ssl, "create_default_context", "ssl context", "ssl context built")
    _wrap(host.Control, "announce_prepared", "prepared")
    _wrap(host.Control, "wait_go", None, "go")
    _wrap(AgentSession, "start", None, "session started")
    _wrap(worker.AgentServer, "aclose", "server aclose")
    from livekit.agents.ipc import job_proc_lazy_main
    from livekit.agents.voice import agent_activity

    _wrap(job_proc_lazy_main._JobProc, "_shutdown_job", "job shutdown", "job shut down")
    _wrap(AgentSession, "aclose", "session aclose", "session closed")
    _wrap(job.JobContext, "_on_session_end", "session end report", "session end reported")
    _wrap(agent_activity.AgentActivity, "start", "activity start", "activity started")
    _wrap(cli, "_run_tcp_console", "console run", "console returned")
    _wrap(host, "fast_exit", "fast_exit")


def fork() -> int:
    pid = _fork()
    if pid == 0:
        mark("forked")
        os._exit = _leave  # type: ignore[assignment]
        if MARKS_DIR:
            _install_marks()
            mark("marks installed")
        if PROFILE_DIR:
            threading.setprofile(_thread_hook)
            main = cProfile.Profile(time.thread_time)
            _profiles.append(main)
            main.enable()
    return pid


os.fork = fork
sys.argv[0] = REAL
runpy.run_path(REAL, run_name="__main__")
