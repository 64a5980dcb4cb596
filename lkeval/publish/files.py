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
* :class:`ResultsDirLock` refuses a second run writing into the same results directory.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from lkeval.errors import OutputError, UsageError
from lkeval.text.masking import mask

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


class ResultsDirLock:
    """An exclusive lock on a results directory for the length of a run.

    Two runs writing into one directory would overwrite each other's results and logs; the
    second is refused (exit 2) instead. ``flock`` dies with the process, so a killed run
    never leaves a stale lock.
    """

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise :class:`UsageError` naming the directory."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        except OSError as exc:
            raise OutputError(str(self.path.parent), _why(exc)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise UsageError(
                    f"{self.path.parent}: another lkeval run is writing here; give this one "
                    "its own --results directory"
                ) from None
            raise OutputError(str(self.path), _why(exc)) from None
        self._fd = fd

    def release(self) -> None:
        """Drop the lock and its file."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        os.close(self._fd)
        self._fd = None

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


__all__ = ["FILE_MODE", "ResultsDirLock", "check_writable", "write_all", "write_text"]
