"""Report files on disk: checked before the run, written whole or not at all, 0644, locked.

Results must never be lost to a write error, so:

* :func:`check_writable` runs before the first agent boots: a typo'd or read-only output
  directory costs a second, not a suite;
* :func:`write_text` writes to a temporary file beside the target, then renames it: a full
  disk leaves the old file (or none), never a 0-byte JUnit that a test-report action would
  read as "no tests"; errors name the target, never the temporary file;
* :func:`write_all` writes every file it can and returns the failures, so one bad path does
  not cost the others;
* files are 0644 whatever the umask: the Action's next step may run as another user;
* :class:`ResultsDirLock` refuses a second run writing into the same results directory,
  naming the run that holds it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from lkeval.errors import OutputError, UsageError
from lkeval.text.masking import mask, redact_argv
from lkeval.text.untrusted import inert_line

FILE_MODE = 0o644
LOCK_NAME = ".lkeval.lock"


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def check_writable(paths: Iterable[str | Path]) -> None:
    """Raise :class:`OutputError` for a path that cannot be written, creating nothing.

    The file's directory, or the nearest one that exists (the rest is made on writing), must
    be a writable directory (``access`` also says no on a read-only file system).
    """
    for path in paths:
        target = Path(path)
        if target.is_dir():
            raise OutputError(str(path), "is a directory")
        if target.exists() and not os.access(target, os.W_OK):
            raise OutputError(str(path), "permission denied")
        parent = target.parent.absolute()
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            raise OutputError(str(path), f"{parent} is not a directory")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise OutputError(str(path), f"{parent} is not writable")
        _probe(str(path), parent)


def _probe(path: str, parent: Path) -> None:
    """Create and remove a file in ``parent``: ``access`` says yes to root everywhere, even
    in ``/proc`` or on a read-only mount, where the write itself would fail after the run."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".lkeval-probe-", dir=parent)
    except OSError as exc:
        raise OutputError(path, f"{parent} is not writable ({exc.strerror})") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)


def write_text(path: str | Path, text: str) -> None:
    """Write ``text``, masked, to ``path`` atomically with mode 0644; :class:`OutputError`."""
    target = Path(path)
    data = mask(text).encode("utf-8")
    tmp: str | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), FILE_MODE)
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise OutputError(str(path), _why(exc)) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def write_all(files: Iterable[tuple[str | Path, str]]) -> list[OutputError]:
    """Write every (path, text); return the failures instead of stopping at the first."""
    failures: list[OutputError] = []
    for path, text in files:
        try:
            write_text(path, text)
        except OutputError as exc:
            failures.append(exc)
    return failures


#: Bytes of the holder's note read back: a pid, a start time and a command line.
HOLDER_BYTES = 4096


class ResultsDirLock:
    """An exclusive lock on a results directory for the length of a run.

    Two runs writing into one directory would overwrite each other's results and logs; the
    second is refused (exit 2), naming the run that holds it: the holder writes its pid, start
    time and command line (secrets redacted) into the lock file. ``flock`` dies with the
    process, so a killed run never leaves a stale lock, only a stale note the next run
    overwrites. The file is removed on release, so a run that opened it just before must check,
    once it holds the lock, that it is still the file at the path (else it locked a removed
    file, and a third run could lock the new one): it tries again.
    """

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / LOCK_NAME
        self._fd: int | None = None
        #: Directories the lock made, deepest first: removed again if the run left them empty
        #: (a run that stopped on bad input creates nothing).
        self._made: list[Path] = []

    def acquire(self) -> None:
        """Take the lock or raise :class:`UsageError` naming the directory and its holder."""
        for _ in range(100):  # each retry means a holder released meanwhile: never for long
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                holder = _read_note(fd)
                os.close(fd)
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise UsageError(
                        f"{self.path.parent}: another lkeval run is writing here"
                        f"{f' ({holder})' if holder else ''}; give this one its own --results "
                        "directory, or wait for that run to end"
                    ) from None
                raise OutputError(str(self.path), _why(exc)) from None
            if _same_file(fd, self.path):
                self._fd = fd
                _write_note(fd)
                return
            os.close(fd)  # locked a file its holder had just removed: the path has another
        raise OutputError(str(self.path), "the lock file keeps being replaced")

    def _open(self) -> int:
        missing = [p for p in (self.path.parent, *self.path.parent.parents) if not p.exists()]
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._made = self._made or missing
            return os.open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        except OSError as exc:
            raise OutputError(str(self.path.parent), _why(exc)) from None

    def release(self) -> None:
        """Drop the lock and its file (removed while still held, see the class)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        os.close(self._fd)
        self._fd = None
        for made in self._made:
            try:
                made.rmdir()
            except OSError:  # not empty: the run wrote there
                break
        self._made = []

    def __enter__(self) -> ResultsDirLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``fd`` is the file at ``path`` now."""
    try:
        at_path = path.stat()
    except OSError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (at_path.st_dev, at_path.st_ino)


def _write_note(fd: int) -> None:
    """Who holds the lock: pid, start time (UTC) and command line, secrets redacted."""
    started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    command = " ".join(redact_argv(["lkeval", *sys.argv[1:]]))
    note = mask(f"pid {os.getpid()}, started {started}: {command}")
    with contextlib.suppress(OSError):  # the note is a courtesy; the lock is what counts
        os.ftruncate(fd, 0)
        os.pwrite(fd, note.encode("utf-8")[:HOLDER_BYTES], 0)


def _read_note(fd: int) -> str:
    """The holder's note, as one bounded line (another process wrote it)."""
    try:
        data = os.pread(fd, HOLDER_BYTES, 0)
    except OSError:
        return ""
    return inert_line(data.decode("utf-8", errors="replace"), 1000)


__all__ = ["FILE_MODE", "ResultsDirLock", "check_writable", "write_all", "write_text"]
