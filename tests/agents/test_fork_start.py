"""The fork server's process started apart from its client (lkeval/agents/fork_start.py, issue
20.4): ``lkeval run`` starts it before its imports and the client adopts it later. What it
leaves when it cannot start, and what a signal while the run waits for its preload does.

The "server" is a stand-in interpreter that only sleeps (never ready): what is tested is who
starts and stops it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import pytest
from conftest import alive

from lkeval.agents.fork_client import ForkServer
from lkeval.agents.fork_start import LAUNCHER_PIDS, ForkServerError, start_server_process

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX")


def test_the_process_is_ours_not_an_orphan_and_logs_where_asked(
    sleeper: Path, tmp_path: Path
) -> None:
    log = tmp_path / "raw" / "fork-server.log"
    started = start_server_process(str(sleeper), {}, log_path=log, log_is_raw=True)
    try:
        assert started.proc.pid in LAUNCHER_PIDS  # the orphan sweep leaves it alone
        assert log.exists() and started.log is not None
        assert alive({started.proc.pid})
    finally:
        started.kill()
    assert not alive({started.proc.pid})
    assert started.channel.fileno() == -1  # closed with it


def test_an_interpreter_that_cannot_start_is_a_fork_server_error(tmp_path: Path) -> None:
    with pytest.raises(ForkServerError, match="could not start"):
        start_server_process(str(tmp_path / "missing"), {}, log_path=tmp_path / "log")


def test_a_signal_while_waiting_for_the_preload_kills_the_adopted_server(sleeper: Path) -> None:
    """The run waits for the server's ``ready``; Ctrl-C comes meanwhile: the server is killed
    before the interrupt goes on (not left preloading after lk-eval has gone)."""
    server = ForkServer.adopt(start_server_process(str(sleeper), {}), {})
    pid = server.pid
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            server.wait_ready(60)
    finally:
        timer.cancel()
        server.kill()
    assert not alive({pid})
