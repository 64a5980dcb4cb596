"""The agent's process tree: it dies with lk-eval, and leaves nothing behind.

Part of the host (loaded by path in the agent's interpreter, standard library and psutil, a
livekit-agents dependency, only). The host becomes a child subreaper, so a tool's child that
called ``setsid`` and lost its parent stays in its tree; when lk-eval is gone (end of file on
the control channel) or the agent exits, the whole tree is killed, lk-eval's links and temp dir
in the agent's directory go, and the unmasked raw log and tape files with them. lk-eval's own
side walks and kills agents' trees with the same functions.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import shutil
import signal
import sys
from collections.abc import Iterable

PR_SET_CHILD_SUBREAPER = 36
# The agent's own directory (its working directory) that lk-eval prepared and cleans up.
AGENT_DIR_ENV = "LKEVAL_AGENT_DIR"
AGENT_TMP = ".tmp"  # the agent's TMPDIR, inside its directory
# The agent's raw (unmasked) log, in the run's private dir: lk-eval publishes a masked copy when
# the agent stops. An agent that outlives lk-eval deletes it (nobody is left to mask it).
RAW_LOG_ENV = "LKEVAL_RAW_LOG"
#: The agent's memory bound in MiB (lk-eval's ``--agent-memory``); see :func:`limit_memory`.
MEMORY_ENV = "LKEVAL_AGENT_MEMORY_MIB"


def become_subreaper() -> None:
    """Orphaned descendants (a tool's child that called ``setsid`` and lost its parent) are
    re-parented to this process instead of init, so they stay in its tree."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def process_tree(root: int) -> list[tuple[int, float]]:
    """Every descendant of ``root`` as (pid, start time), through psutil (a dependency of
    livekit-agents, so in every agent interpreter): the same walk on Linux and macOS.

    Descendants that called ``setsid`` left ``root``'s process group but not its tree; the
    start time lets a later kill skip a pid the kernel has given to someone else since.
    """
    import psutil

    found: list[tuple[int, float]] = []
    try:
        children = psutil.Process(root).children(recursive=True)
    except psutil.Error:
        return found
    for child in children:
        with contextlib.suppress(psutil.Error):
            found.append((child.pid, child.create_time()))
    return found


def parent_of(pid: int) -> int | None:
    """``pid``'s parent now, or None when it is gone."""
    import psutil

    try:
        return int(psutil.Process(pid).ppid())
    except psutil.Error:
        return None


def kill_processes(processes: Iterable[tuple[int, float]], sig: int = signal.SIGKILL) -> None:
    """Signal each (pid, start time) that is still the process it was."""
    import psutil

    for pid, started in processes:
        with contextlib.suppress(psutil.Error, OSError):
            if psutil.Process(pid).create_time() == started:
                os.kill(pid, sig)


def clean_agent_dir(path: str) -> None:
    """Remove what lk-eval put in an agent's directory (the links to the project's entries
    and the agent's temp dir), then the directory itself if the agent wrote nothing else."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(path):
            if entry.is_symlink():
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
    shutil.rmtree(os.path.join(path, AGENT_TMP), ignore_errors=True)
    with contextlib.suppress(OSError):
        os.rmdir(path)


def drop_raw_log(path: str) -> None:
    """Delete an unpublished raw log, and its private dir once the last one is gone."""
    with contextlib.suppress(OSError):
        os.unlink(path)
    with contextlib.suppress(OSError):
        os.rmdir(os.path.dirname(path))


def die_with_tree(code: int) -> None:
    """Kill every descendant, clean up after the agent, and exit at once (never returns).

    Runs when lk-eval is gone: its directory links and temp dir go, and the raw log too (it
    is unmasked, and nobody is left to publish a masked copy).
    """
    kill_processes(process_tree(os.getpid()))
    agent_dir = os.environ.get(AGENT_DIR_ENV)
    if agent_dir:
        clean_agent_dir(agent_dir)
    for tape_file in ("LKEVAL_TAPE", "LKEVAL_TAPE_OUT"):  # unmasked exchanges, beside the log
        with contextlib.suppress(OSError):
            os.unlink(os.environ.get(tape_file) or "")
    raw_log = os.environ.get(RAW_LOG_ENV)
    if raw_log:
        drop_raw_log(raw_log)
    os.kill(os.getpid(), signal.SIGKILL)
    os._exit(code)


def fast_exit(code: int) -> None:
    """Exit without the interpreter's final garbage collection (~0.75 s of a 0.8 s exit).

    The agent's own shutdown hooks have run by now (``_run_tcp_console`` returned after the
    server closed), so only flushing is left to do, and stopping what the agent started and
    left running (a tool's ``setsid`` child would otherwise outlive it).
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    kill_processes(process_tree(os.getpid()))
    os._exit(code)


def limit_memory() -> None:
    """A hard backstop under lk-eval's watch on the agent's resident memory, for growth faster
    than that watch polls: ``RLIMIT_DATA`` at twice the bound, inherited by the agent's own
    processes. Not ``RLIMIT_AS``: native libraries (ONNX Runtime, LiveKit's Rust core)
    reserve far more address space than they use and fail under it; ``RLIMIT_DATA`` counts
    only writable private memory, which a reservation (``PROT_NONE``) is not."""
    try:
        mib = int(os.environ.get(MEMORY_ENV, "0"))
    except ValueError:
        return
    if mib > 0:
        limit = 2 * mib * 1024 * 1024
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
