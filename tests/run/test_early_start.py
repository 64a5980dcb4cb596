"""The fork server started before lk-eval's imports (lkeval/run/early_start.py, issue 20.4):
started only when argv says plainly which one the run wants, handed over only to a run that
asks for that one, killed (with its private raw-log directory) otherwise; a signal meanwhile
is kept for the run, a second one ends the process.

The "fork server" here is a stand-in interpreter that only sleeps: what is tested is who
starts, keeps and stops it, not the server.
"""

from __future__ import annotations

import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import alive

from lkeval.agents.environment import agent_environment
from lkeval.run.early_start import RAW_LOGS_PREFIX, EarlyStart, LaunchKey, launch_key


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    path = tmp_path / "agent.py"
    path.write_text("from livekit.plugins import openai\n")
    return path


@pytest.fixture
def early(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[EarlyStart]:
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR is read again
    holder = EarlyStart()
    yield holder
    holder.end()


def _argv(agent: Path, python: Path, *more: str) -> list[str]:
    return ["run", "--agent", str(agent), "--scenarios", "s.yaml", "--python", str(python), *more]


def test_the_key_is_the_agents_environment_interpreter_and_resolved_path(agent: Path) -> None:
    argv = ["run", "--scenarios", "a.yaml", "b.yaml", "--agent", str(agent), "--match", "x"]
    argv += ["--env", "A=1", "--env=B=x=y", "--env", "A=2", "--inference-class", "agent"]
    argv += ["--python", "/opt/py", "--concurrency", "3"]
    key = launch_key(argv)
    expected = agent_environment({"A": "2", "B": "x=y"}, "agent")
    assert key == LaunchKey.of("/opt/py", expected, agent.resolve())


@pytest.mark.parametrize(
    "more",
    [
        ["--cold-start"],
        ["--shard", "1/2"],
        ["--shard=1/2"],
        ["--help"],
        ["-h"],
        ["--cassettes", "c", "--cassette-mode", "replay"],
        ["--cassette-mode=replay"],
        ["--cassettes", "c", "--cassettes-from", "github:main"],
        ["--env", "NOVALUE"],
        ["--env", "=x"],
        ["--python"],
        ["--python", "--cold-start"],
        ["--", "x"],
    ],
    ids=lambda more: " ".join(more),
)
def test_no_key_when_the_run_may_want_no_server_or_argv_is_not_plain(
    agent: Path, more: list[str]
) -> None:
    assert launch_key(["run", "--agent", str(agent), "--scenarios", "s.yaml", *more]) is None


@pytest.mark.parametrize("command", ["validate", "merge", "calibrate", "report", "--version"])
def test_no_key_for_other_commands(agent: Path, command: str) -> None:
    assert launch_key([command, "--agent", str(agent), "--scenarios", "s.yaml"]) is None


def test_no_key_for_a_missing_agent_file(tmp_path: Path) -> None:
    argv = ["run", "--agent", str(tmp_path / "missing.py"), "--scenarios", "s.yaml"]
    assert launch_key(argv) is None
    assert launch_key(["run", "--scenarios", "s.yaml"]) is None


def test_the_server_goes_to_the_run_that_asks_for_it_once(
    early: EarlyStart, agent: Path, sleeper: Path, tmp_path: Path
) -> None:
    argv = _argv(agent, sleeper)
    assert early.begin(argv)
    key = launch_key(argv)
    assert key is not None
    claimed = early.claim(key)
    assert claimed is not None
    try:
        assert claimed.raw_logs.parent == tmp_path / "tmp"
        assert claimed.raw_logs.name.startswith(RAW_LOGS_PREFIX)
        assert stat.S_IMODE(claimed.raw_logs.stat().st_mode) == 0o700  # private: raw logs
        assert (claimed.raw_logs / "fork-server.log").exists()
        assert alive({claimed.process.proc.pid})
        assert early.claim(key) is None  # once
        early.discard()  # nothing of the run's is touched
        assert alive({claimed.process.proc.pid})
    finally:
        claimed.process.kill()
    assert not alive({claimed.process.proc.pid})


def test_a_run_asking_for_another_server_kills_it_and_its_logs(
    early: EarlyStart, agent: Path, sleeper: Path, tmp_path: Path
) -> None:
    assert early.begin(_argv(agent, sleeper))
    (raw_logs,) = (tmp_path / "tmp").iterdir()
    pid = _server_pid(early)
    other = launch_key(_argv(agent, sleeper, "--env", "X=1"))
    assert other is not None
    assert early.claim(other) is None
    assert not alive({pid})
    assert list((tmp_path / "tmp").iterdir()) == [], raw_logs


def test_discard_and_end_kill_an_unclaimed_server(
    early: EarlyStart, agent: Path, sleeper: Path, tmp_path: Path
) -> None:
    before = signal.getsignal(signal.SIGTERM)
    assert early.begin(_argv(agent, sleeper))
    assert signal.getsignal(signal.SIGTERM) != before  # held while lk-eval imports
    pid = _server_pid(early)
    early.end()
    assert not alive({pid})
    assert list((tmp_path / "tmp").iterdir()) == []
    assert signal.getsignal(signal.SIGTERM) == before
    early.end()  # idempotent


def test_an_interpreter_that_cannot_start_leaves_nothing(
    early: EarlyStart, agent: Path, tmp_path: Path
) -> None:
    before = signal.getsignal(signal.SIGINT)
    assert not early.begin(_argv(agent, tmp_path / "no-python"))
    assert list((tmp_path / "tmp").iterdir()) == []
    assert signal.getsignal(signal.SIGINT) != before  # still the run's: it goes on cold
    early.end()
    assert signal.getsignal(signal.SIGINT) == before


def test_nothing_starts_without_a_key(early: EarlyStart, agent: Path, tmp_path: Path) -> None:
    assert not early.begin(["run", "--agent", str(agent), "--scenarios", "s.yaml", "--cold-start"])
    assert list((tmp_path / "tmp").iterdir()) == []


_HOLDS = """
import signal, sys
from lkeval.run.early_start import EarlyStart
early = EarlyStart()
early.begin(sys.argv[1:])
signal.raise_signal(signal.SIGTERM)  # killed here unless it is held for the run
print(early.take_signal().name)
"""


@pytest.mark.parametrize("more", [["--cold-start"], ["--shard", "1/2"], ["--cassettes-from", "x"]])
def test_a_run_without_an_early_server_still_keeps_a_signal_for_the_run(
    agent: Path, more: list[str]
) -> None:
    """Issue 30.6: with no fork server started early, a SIGTERM while lk-eval imported ended
    the process with nothing written (SIGTERM's default), a Ctrl-C raised mid-import."""
    argv = ["run", "--agent", str(agent), "--scenarios", "s.yaml", *more]
    proc = subprocess.run(
        [sys.executable, "-c", _HOLDS, *argv], capture_output=True, text=True, timeout=60
    )
    assert (proc.returncode, proc.stdout.strip()) == (0, "SIGTERM"), proc.stderr


def test_other_commands_hold_no_signal(early: EarlyStart) -> None:
    before = signal.getsignal(signal.SIGTERM)
    assert not early.begin(["report", "--results", "r.json"])
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_download_before_the_run_is_cut_short_and_the_signal_kept(
    early: EarlyStart, agent: Path
) -> None:
    early.begin(["run", "--agent", str(agent), "--scenarios", "s.yaml", "--cold-start"])
    with pytest.raises(KeyboardInterrupt), early.interruptible():
        signal.raise_signal(signal.SIGINT)
    assert early.signal_pending and early.take_signal() == signal.SIGINT
    signal.raise_signal(signal.SIGTERM)  # held before the download: it does not start
    with pytest.raises(KeyboardInterrupt), early.interruptible():
        raise AssertionError("the download started")
    assert early.take_signal() == signal.SIGTERM


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_signal_while_importing_waits_for_the_run_and_a_second_ends_it_now(
    early: EarlyStart, agent: Path, sleeper: Path, tmp_path: Path
) -> None:
    assert early.begin(_argv(agent, sleeper))
    pid = _server_pid(early)
    signal.raise_signal(signal.SIGINT)  # no KeyboardInterrupt: kept for the run
    assert alive({pid})
    assert early.take_signal() == signal.SIGINT
    assert early.take_signal() is None  # once
    signal.raise_signal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):  # the second: the server first, then the exit
        signal.raise_signal(signal.SIGINT)
    assert not alive({pid})
    assert list((tmp_path / "tmp").iterdir()) == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _server_pid(early: EarlyStart) -> int:
    held = early._held
    assert held is not None
    pid = held.process.proc.pid
    assert alive({pid})
    return pid
