"""Bounds on one agent process: its resident memory and its log, watched from outside.

One runaway agent must not take the runner down with every other scenario's result: an agent
that flooded stdout once left a 1.1 GB log and 2 GB of disk, and nothing bounded an agent's
memory. :meth:`AgentProcess.wait_failure` polls :func:`bound_passed` (the log's size and one small
``/proc`` read) and stops an agent past either bound; inside the agent,
:func:`lkeval.host.tree.limit_memory` sets ``RLIMIT_DATA`` at twice the memory bound
for growth faster than the poll.
"""

from __future__ import annotations

import contextlib
import os

from lkeval import defaults

DEFAULT_AGENT_MEMORY_MIB = defaults.AGENT_MEMORY_MIB
DEFAULT_AGENT_LOG_MIB = defaults.AGENT_LOG_MIB

#: How a bound's reason starts (the agent did not die: lk-eval stopped it).
STOPPED = "agent stopped: "
_MIB = 1024 * 1024
_PAGE = os.sysconf("SC_PAGE_SIZE")


class ResidentMemory:
    """A process's resident memory in MiB, from ``/proc/PID/statm`` read through one open
    descriptor: the watch reads it ten times a second for every live agent, and opening the
    file each time costs several times the read. The descriptor keeps reading the process it
    was opened for (never another that took over its pid); None once it is gone."""

    def __init__(self, pid: int) -> None:
        self._fd: int | None = None
        with contextlib.suppress(OSError):
            self._fd = os.open(f"/proc/{pid}/statm", os.O_RDONLY)

    def mib(self) -> float | None:
        """The resident MiB now, or None (the process is gone, or no ``/proc``)."""
        if self._fd is None:
            return None
        try:
            return int(os.pread(self._fd, 256, 0).split()[1]) * _PAGE / _MIB
        except (OSError, IndexError, ValueError):
            return None

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        self.close()


def bound_passed(
    memory: ResidentMemory, log_size: int | None, memory_mib: int, log_mib: int
) -> str | None:
    """Why the agent must be stopped (the reason of its ``error``), or None; 0: no bound.
    ``log_size`` is its raw log's size in bytes (None: unknown)."""
    if log_mib and log_size is not None and log_size > log_mib * _MIB:
        return f"{STOPPED}it wrote more than {log_mib} MiB of log (--agent-log-limit)"
    resident = memory.mib() if memory_mib else None
    if resident is not None and resident > memory_mib:
        return (
            f"{STOPPED}it used {resident:.0f} MiB of memory, more than its "
            f"{memory_mib} MiB (--agent-memory)"
        )
    return None
