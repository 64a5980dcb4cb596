"""Report files: checked before the run, written whole (0644) or not at all, every one tried,
errors naming the target; one run per results directory (issue 11 item 6)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import clean_env
from report_fixtures import run_results, write_results

from lkeval.cli import main
from lkeval.errors import OutputError, UsageError
from lkeval.publish.files import ResultsDirLock, check_writable, write_all, write_text
from lkeval.text.masking import register_secret


def test_written_files_are_0644_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        write_text(tmp_path / "deep" / "junit.xml", "<x/>")
    finally:
        os.umask(old)
    target = tmp_path / "deep" / "junit.xml"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert target.read_text(encoding="utf-8") == "<x/>"


def test_a_failed_write_names_the_target_and_leaves_no_file_behind(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(OutputError) as info:
        write_text(blocker / "junit.xml", "<x/>")
    assert info.value.path == str(blocker / "junit.xml")
    assert str(blocker / "junit.xml") in str(info.value) and ".tmp" not in str(info.value)


def test_a_full_disk_leaves_the_old_file_not_a_zero_byte_one(tmp_path: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")  # pragma: no cover
    target = tmp_path / "junit.xml"
    target.write_text("<old/>", encoding="utf-8")
    # The write goes to a temp file beside the target; make that temp file /dev/full.
    code = _python(
        "import os, tempfile, sys\n"
        "from lkeval.publish import files\n"
        "real = tempfile.mkstemp\n"
        "def full(*a, **k):\n"
        "    fd, name = real(*a, **k)\n"
        "    os.dup2(os.open('/dev/full', os.O_WRONLY), fd)\n"
        "    return fd, name\n"
        "files.tempfile.mkstemp = full\n"
        "try:\n"
        f"    files.write_text({str(target)!r}, 'x' * 100000)\n"
        "except files.OutputError as e:\n"
        "    print(e); sys.exit(2)\n"
    )
    assert code.returncode == 2, code.stderr
    assert f"{target}: cannot write: No space left on device" in code.stdout
    assert target.read_text(encoding="utf-8") == "<old/>"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junit.xml"]  # no temp left


def test_write_all_writes_the_others_and_returns_the_failures(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    register_secret("sk-secret-value-123456")
    failures = write_all(
        [(blocker / "a.xml", "a"), (tmp_path / "b.md", "key sk-secret-value-123456")]
    )
    assert [f.path for f in failures] == [str(blocker / "a.xml")]
    assert (tmp_path / "b.md").read_text(encoding="utf-8") == "key ***"


def test_check_writable_creates_nothing_and_names_the_path(tmp_path: Path) -> None:
    check_writable([tmp_path / "new" / "deeper" / "results.json"])
    assert not (tmp_path / "new").exists()
    (tmp_path / "dir").mkdir()
    with pytest.raises(OutputError, match="is a directory"):
        check_writable([tmp_path / "dir"])


def test_a_second_run_into_the_same_results_dir_is_refused(tmp_path: Path) -> None:
    with ResultsDirLock(tmp_path / "out"):
        with pytest.raises(UsageError, match="another lkeval run is writing here"):
            ResultsDirLock(tmp_path / "out").acquire()
        other = _python(
            "from lkeval.publish.files import ResultsDirLock\n"
            f"ResultsDirLock({str(tmp_path / 'out')!r}).acquire()\n"
        )
        assert other.returncode != 0 and "another lkeval run" in other.stderr
    with ResultsDirLock(tmp_path / "out"):  # released: the next run may go
        (tmp_path / "out" / "results.json").write_text("{}")
    assert list((tmp_path / "out").iterdir()) == [tmp_path / "out" / "results.json"]


def test_a_run_that_wrote_nothing_leaves_no_directory_behind(tmp_path: Path) -> None:
    """The lock makes the results directory; a run stopped on bad input before it wrote
    anything creates nothing, and a directory that was there stays."""
    with ResultsDirLock(tmp_path / "new" / "deeper"):
        assert (tmp_path / "new" / "deeper").is_dir()
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "kept").mkdir()
    with ResultsDirLock(tmp_path / "kept"):
        pass
    assert (tmp_path / "kept").is_dir()


def test_the_refusal_names_the_run_that_holds_the_directory(tmp_path: Path) -> None:
    """The holder is a live process whose command line carried a token: the second run is
    told its pid and command, never the token."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from lkeval.publish.files import ResultsDirLock\n"
            f"ResultsDirLock({str(tmp_path / 'out')!r}).acquire()\n"
            "print('held', flush=True)\n"
            "time.sleep(120)\n",
            "run",
            "--github-token",
            "ghs_holders_token_123456",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(UsageError) as refused:
            ResultsDirLock(tmp_path / "out").acquire()
    finally:
        holder.kill()
        holder.wait()
    message = str(refused.value)
    assert f"pid {holder.pid}, started " in message, message
    assert "lkeval run --github-token ***" in message and "ghs_holders" not in message
    with ResultsDirLock(tmp_path / "out"):  # killed: its lock went with it
        pass


class _OpenedBeforeTheRelease(ResultsDirLock):
    """A run that opened the lock file just before its holder released (and removed) it."""

    def __init__(self, directory: Path, stale: int) -> None:
        super().__init__(directory)
        self.stale: int | None = stale

    def _open(self) -> int:
        if self.stale is not None:
            fd, self.stale = self.stale, None
            return fd
        return super()._open()


def test_a_lock_on_a_removed_lock_file_is_not_a_lock(tmp_path: Path) -> None:
    """Locking the file its holder had just removed would let a third run lock the new one at
    the same time: the run tries again on the file at the path."""
    first = ResultsDirLock(tmp_path / "out")
    first.acquire()
    late = _OpenedBeforeTheRelease(tmp_path / "out", os.open(first.path, os.O_RDWR))
    first.release()
    with late, pytest.raises(UsageError, match="another lkeval run is writing here"):
        ResultsDirLock(tmp_path / "out").acquire()


def test_report_writes_the_other_outputs_when_one_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results.json"
    write_results(run_results(), results)
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    bad, good = blocker / "junit.xml", tmp_path / "report.md"
    argv = ["report", "--results", str(results), "--no-github"]
    code = main([*argv, "--junit", str(bad), "--markdown", str(good)])
    captured = capsys.readouterr()
    assert code == 2
    assert good.is_file() and "lk-eval gate:" in captured.out  # the rest still happened
    assert f"lk-eval: {bad}: cannot write:" in captured.err and "internal error" not in captured.err


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), timeout=60
    )
