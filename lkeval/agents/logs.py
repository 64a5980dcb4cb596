"""An agent's log: read while it runs (its tail, for reasons), published masked when it stops.

The agent writes its raw output (console logging at DEBUG with ANSI colours, tracebacks) into
the run's private directory; only a copy without colours and through lk-eval's masking
reaches ``logs/``, where reports and artifacts pick it up.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, TextIO

from lkeval import defaults
from lkeval.text.masking import mask

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


#: An agent's published log is cut here, with a marker saying so; the agent itself is stopped
#: once its raw log passes it (see :meth:`AgentProcess.wait_failure`). A chatty agent at DEBUG
#: writes a few MiB per conversation; one that floods stdout once left a 1.1 GB log, 2 GB of
#: disk and 3.3 GB of lk-eval memory.
LOG_LIMIT_BYTES = defaults.AGENT_LOG_MIB * 1024 * 1024
#: Lines are masked a batch at a time (bounded memory, however large the log). A batch holds
#: whole lines only: lk-eval's masker splits multi-line secrets into lines, so no secret spans
#: two batches.
_BATCH_BYTES = 1024 * 1024
#: A line longer than this is cut at its last whitespace before it (a secret has none, so none
#: is cut in half) and the rest of the line is dropped.
_LINE_BYTES = 64 * 1024

_warned: set[Path] = set()


def publish_log(raw: Path, target: Path, limit: int = LOG_LIMIT_BYTES) -> None:
    """Copy an agent's raw log to ``target`` without ANSI colours, masked (the process's one
    masker), cut at ``limit`` bytes with a marker; bounded memory however large the raw log is.

    A log that cannot be masked is not published (a note says so): it may hold the secrets
    the masking was there to hide. A log that cannot be written (a full disk) is left out with
    one warning on stderr: the results and reports matter more than a log. The raw file is
    removed either way.
    """
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with raw.open("rb") as src, tmp.open("w", encoding="utf-8") as out:
            _copy_masked(src, out, limit)
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if raw.exists() and target.parent not in _warned:  # once per directory, not per agent
            _warned.add(target.parent)
            print(
                f"lk-eval: warning: {target}: not written: {exc.strerror or exc}",
                file=sys.stderr,
                flush=True,
            )
    finally:
        if raw.resolve() != target.resolve():  # the same file when a test keeps both together
            with contextlib.suppress(OSError):
                raw.unlink()


def _copy_masked(src: BinaryIO, out: TextIO, limit: int) -> None:
    written = 0
    for batch in _batches(src):
        try:
            text = mask(_ANSI.sub("", batch))
        except Exception as exc:  # never leave an unmasked log where reports are kept
            out.seek(0)
            out.truncate()
            out.write(
                f"lk-eval: this log could not be masked and was dropped ({type(exc).__name__})\n"
            )
            return
        data = text.encode("utf-8", errors="replace")
        if written + len(data) > limit:
            cut = data[: max(0, limit - written)].rsplit(b"\n", 1)[0]
            out.write(cut.decode("utf-8", errors="ignore"))
            size = os.fstat(src.fileno()).st_size
            out.write(
                f"\nlk-eval: log cut at {limit // (1024 * 1024)} MiB (lk-eval's limit per "
                f"agent); the agent wrote {size / (1024 * 1024):.0f} MiB\n"
            )
            return
        out.write(text)
        written += len(data)


def _batches(src: BinaryIO) -> Iterator[str]:
    """The raw log as text, about :data:`_BATCH_BYTES` of whole lines at a time."""
    batch: list[bytes] = []
    size = 0
    while line := src.readline(_LINE_BYTES):
        if len(line) == _LINE_BYTES and not line.endswith(b"\n"):
            line = _cut_long_line(line)
            while (rest := src.readline(_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass  # the rest of an over-long line is dropped
        batch.append(line)
        size += len(line)
        if size >= _BATCH_BYTES:
            yield b"".join(batch).decode("utf-8", errors="replace")
            batch, size = [], 0
    if batch:
        yield b"".join(batch).decode("utf-8", errors="replace")


def _cut_long_line(line: bytes) -> bytes:
    """The start of an over-long line up to its last whitespace (no secret is cut in half),
    with a marker."""
    head = line.rsplit(None, 1)[0] if len(line.split(None, 1)) > 1 else b""
    return head + b" [lk-eval: line longer than 64 KiB cut]\n"


def publish_pending_logs(work_dir: Path, logs_dir: Path) -> None:
    """Publish every raw agent log still in ``work_dir`` (agents killed on an interrupt)."""
    for raw in sorted(work_dir.glob("*.log")):
        with contextlib.suppress(OSError):
            publish_log(raw, logs_dir / raw.name)
