"""The fork server drops the unpublished raw logs once its runner is gone, however it learns.

Raw logs are unmasked: lk-eval publishes a masked copy, and when lk-eval dies (SIGKILL) the
fork server must delete them. It learned of the death only from the end of its input; a child
that exited with lk-eval and was reaped first made its ``exited`` report hit the broken pipe,
the server died of ``BrokenPipeError`` and the raw log stayed in the temp dir
(tests/e2e/test_orphans.py's SIGKILL-warm case failed now and then on exactly that).

The scenario runs in a child interpreter of its own: it rewires fds 0 and 1 and forks.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCENARIO = r"""
import os, socket, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
from lkeval.host import fork_server

raw_dir = tempfile.mkdtemp(prefix="lkeval-raw-logs-", dir=sys.argv[2])
raw_log = os.path.join(raw_dir, "agent.log")
open(raw_log, "w").close()
r_in, w_in = os.pipe()
r_out, w_out = os.pipe()
os.close(r_out)  # stdout: nobody reads it any more (lk-eval was SIGKILLed)
if sys.argv[3] == "eof-first":
    os.close(w_in)  # stdin: end of input
a, b = socket.socketpair()
server = fork_server.Server(b.fileno())
server.raw_logs.add(raw_log)
pid = os.fork()
if pid == 0:
    os._exit(0)  # an agent that died with lk-eval
server.children[pid] = "spawn-1"
os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # it has exited; the server reaps it
os.dup2(r_in, 0)
os.dup2(w_out, 1)
try:
    server.serve()
    outcome = "returned"
except BaseException as exc:
    outcome = type(exc).__name__
with open(os.path.join(sys.argv[2], "outcome"), "w") as out:
    out.write(f"{outcome} {os.path.exists(raw_log)}")
"""


@pytest.mark.parametrize("order", ["exit-reaped-first", "eof-first"])
def test_a_lost_runner_leaves_no_raw_log_behind(tmp_path: Path, order: str) -> None:
    """``exit-reaped-first``: stdin is still open (the runner died but its pipe has not
    closed yet), so the broken pipe of the ``exited`` report is the only sign."""
    proc = subprocess.run(
        [sys.executable, "-c", SCENARIO, str(ROOT), str(tmp_path), order],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    outcome = (tmp_path / "outcome").read_text() if (tmp_path / "outcome").exists() else ""
    assert outcome == "returned False", proc.stderr  # serve() ended well; the raw log is gone
