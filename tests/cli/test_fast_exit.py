"""The CLI leaves without the interpreter's teardown, after flushing (issue 20.4).

What a normal exit would have done that matters is done first: logging is shut down (its
files flushed and closed), stdout and stderr are flushed (a pipe holds block-buffered lines);
a thread that is not a daemon is still waited for. Through the real command in a child
process, with stdout a pipe, and in-process with ``os._exit`` replaced.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import clean_env

import lkeval.cli


class _Left(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


def _no_os_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_exit(code: int) -> None:
        raise _Left(code)

    monkeypatch.setattr(lkeval.cli.os, "_exit", fake_exit)


def test_leave_flushes_logging_and_streams_before_os_exit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _no_os_exit(monkeypatch)
    log = tmp_path / "routed.log"
    handler = logging.FileHandler(log, delay=True)
    logger = logging.getLogger("lkeval-test-fast-exit")
    logger.addHandler(handler)
    flushed: list[str] = []
    monkeypatch.setattr(sys.stdout, "flush", lambda: flushed.append("stdout"))
    monkeypatch.setattr(sys.stderr, "flush", lambda: flushed.append("stderr"))
    try:
        logger.warning("written before the exit")
        with pytest.raises(_Left) as left:
            lkeval.cli.leave(3)
    finally:
        logger.removeHandler(handler)
    assert left.value.code == 3
    assert flushed[-2:] == ["stdout", "stderr"]  # after logging.shutdown()
    assert handler.stream is None  # logging.shutdown() closed it
    assert log.read_text() == "written before the exit\n"


def test_a_live_thread_that_is_not_a_daemon_gets_the_normal_exit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_os_exit(monkeypatch)
    release = threading.Event()
    worker = threading.Thread(target=release.wait, daemon=False)
    worker.start()
    try:
        with pytest.raises(SystemExit) as exited:
            lkeval.cli.leave(1)
    finally:
        release.set()
        worker.join()
    assert exited.value.code == 1


def test_the_real_command_exits_with_its_code_and_every_line(tmp_path: Path) -> None:
    """``lkeval validate`` on a bad file: exit 2, its whole output through a pipe."""
    scenarios = tmp_path / "scenarios.yaml"
    scenarios.write_text("name: Bad\nscenarios:\n" + "  - label: x\n    turns: 3\n" * 200)
    proc = subprocess.run(
        [sys.executable, "-m", "lkeval", "validate", str(scenarios)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = (proc.stdout + proc.stderr).splitlines()
    assert sum("turns" in line for line in lines) >= 200, lines[-3:]


def test_the_lkeval_command_leaves_the_same_way(tmp_path: Path) -> None:
    """The console script ``lkeval`` runs what ``python -m lkeval`` runs: no interpreter
    teardown (an ``atexit`` hook never runs) and the command's exit code."""
    import tomllib

    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"]["lkeval"] == "lkeval.__main__:main"
    scenarios = tmp_path / "scenarios.yaml"
    scenarios.write_text("name: Bad\nscenarios:\n  - label: x\n    turns: 3\n")
    script = (
        "import atexit, sys; atexit.register(print, 'torn down'); "
        f"sys.argv = ['lkeval', 'validate', {str(scenarios)!r}]; "
        "from lkeval.__main__ import main; main()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], env=clean_env(), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "turns" in proc.stdout + proc.stderr
    assert "torn down" not in proc.stdout + proc.stderr
