"""Bounds on one agent process: its resident memory and its log, watched from outside.

One runaway agent must not take the runner down with every other scenario's result: an agent
that flooded stdout once left a 1.1 GB log and 2 GB of disk, and nothing bounded an agent's
memory. :meth:`AgentProcess.wait_failure` polls :func:`bound_passed` (a ``stat`` and one small
``/proc`` read) and stops an agent past either bound; inside the agent,
:func:`lkeval.agents.agent_host.limit_memory` sets ``RLIMIT_DATA`` at twice the memory bound
for growth faster than the poll.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from lkeval import defaults

DEFAULT_AGENT_MEMORY_MIB = defaults.AGENT_MEMORY_MIB
DEFAULT_AGENT_LOG_MIB = defaults.AGENT_LOG_MIB

#: How a bound's reason starts (the agent did not die: lk-eval stopped it).
STOPPED = "agent stopped: "
_MIB = 1024 * 1024
_PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_mib(pid: int) -> float | None:
    """The process's resident memory in MiB (``/proc/PID/statm``), or None."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE / _MIB
    except (OSError, IndexError, ValueError):
        return None


def bound_passed(pid: int, raw_log: Path, memory_mib: int, log_mib: int) -> str | None:
    """Why the agent must be stopped (the reason of its ``error``), or None; 0: no bound."""
    with contextlib.suppress(OSError):
        if log_mib and raw_log.stat().st_size > log_mib * _MIB:
            return f"{STOPPED}it wrote more than {log_mib} MiB of log (--agent-log-limit)"
    resident = resident_mib(pid) if memory_mib else None
    if resident is not None and resident > memory_mib:
        return (
            f"{STOPPED}it used {resident:.0f} MiB of memory, more than its "
            f"{memory_mib} MiB (--agent-memory)"
        )
    return None
