"""The run's last line of defence against leftover processes: kill every live agent with its
tree, and sweep up descendants that outlived an agent which died on its own."""

from __future__ import annotations

import os

from lkeval.agents.fork_start import LAUNCHER_PIDS
from lkeval.agents.process import LIVE_PROCESSES
from lkeval.host import tree


def kill_all_now() -> None:
    """Last resort on interrupt, and the run's final sweep: SIGKILL every agent still alive,
    with its whole tree, and (after :func:`adopt_orphans`) every orphan adopted meanwhile."""
    for agent in list(LIVE_PROCESSES):
        agent.kill_now()
    LIVE_PROCESSES.clear()
    if _ADOPTING:
        _sweep_orphans()


_ADOPTING = False


def adopt_orphans() -> None:
    """Make lk-eval a child subreaper (Linux): descendants of an agent that died on its own (a
    crash in a tool that had started a ``setsid`` child) come to lk-eval instead of init, and
    :func:`kill_all_now` stops them. For the CLI process, which starts nothing else."""
    global _ADOPTING
    tree.become_subreaper()
    _ADOPTING = True


def _sweep_orphans() -> None:
    me = os.getpid()
    for pid, started in tree.process_tree(me):
        if tree.parent_of(pid) != me or pid in LAUNCHER_PIDS:
            continue
        tree.kill_processes([(pid, started), *tree.process_tree(pid)])
