"""An agent's log: read while it runs (its tail, for reasons), published masked when it stops.

The agent writes its raw output (console logging at DEBUG with ANSI colours, tracebacks) into
the run's private directory; only a copy without colours and through lk-eval's masking
reaches ``logs/``, where reports and artifacts pick it up.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from pathlib import Path

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def read_log_tail(path: Path, lines: int = 30) -> tuple[str, ...]:
    """The last lines of an agent log, without ANSI colours."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ()
    cleaned = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    return tuple(line for line in cleaned if line)[-lines:]


def publish_log(raw: Path, target: Path, log_filter: Callable[[str], str] | None) -> None:
    """Move an agent's raw log to ``target`` without ANSI colours, through ``log_filter``.

    A log that cannot be filtered is not published (a note says so): it may hold the secrets
    the filter was there to mask. The raw file is removed either way.
    """
    try:
        text = raw.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return
    try:
        text = _ANSI.sub("", text)
        if log_filter is not None:
            text = log_filter(text)
    except Exception as exc:  # never leave an unmasked log where reports are kept
        text = f"lk-eval: this log could not be masked and was dropped ({type(exc).__name__})\n"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    finally:
        if raw.resolve() != target.resolve():  # the same file when a test keeps both together
            with contextlib.suppress(OSError):
                raw.unlink()


def publish_pending_logs(
    work_dir: Path, logs_dir: Path, log_filter: Callable[[str], str] | None
) -> None:
    """Publish every raw agent log still in ``work_dir`` (agents killed on an interrupt)."""
    for raw in sorted(work_dir.glob("*.log")):
        with contextlib.suppress(OSError):
            publish_log(raw, logs_dir / raw.name, log_filter)
