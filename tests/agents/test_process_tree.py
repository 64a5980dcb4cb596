"""The process-tree walk (psutil, so macOS gets the same guarantee as Linux): descendants that
left the process group are found, and a kill never hits a pid that was given to another process."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from lkeval.host import tree

# a child that starts a grandchild in its own session (as a tool's daemon would), then waits
SPAWNER = (
    "import subprocess, sys, time\n"
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
    " start_new_session=True)\n"
    "print(p.pid, flush=True)\n"
    "time.sleep(60)\n"
)


def dead(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_the_walk_finds_a_setsid_grandchild_and_the_kill_checks_start_times() -> None:
    child = subprocess.Popen([sys.executable, "-c", SPAWNER], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        grandchild = int(child.stdout.readline())
        walked = dict(tree.process_tree(os.getpid()))
        assert child.pid in walked and grandchild in walked
        assert tree.parent_of(grandchild) == child.pid
        # a start time that does not match: the pid is someone else's now, left alone
        tree.kill_processes([(grandchild, walked[grandchild] + 1.0)])
        time.sleep(0.2)
        assert psutil.Process(grandchild).status() != psutil.STATUS_ZOMBIE
        tree.kill_processes(tree.process_tree(child.pid))
        assert dead(grandchild)  # its parent sleeps, so it stays a zombie until reaped
    finally:
        child.kill()
        child.wait()
    assert tree.process_tree(child.pid) == []  # a gone root has no tree
