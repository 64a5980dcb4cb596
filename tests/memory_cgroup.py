"""A memory cgroup of its own for one test or bench run (Linux, root): the real bound a
container or a CI runner's memory limit puts on a run, made on this machine.

Made under lk-eval's own cgroup (v1: the ``memory`` hierarchy; v2: the unified one, where
the parent must delegate the memory controller). :func:`memory_cgroup` says why it cannot be
made (not root, no memory controller): a test that needs it then says so by name rather than
passing silently; on a machine where it can be made, it is made or the test fails.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class MemoryCgroup:
    """A cgroup with a memory limit; processes join it with :meth:`join`."""

    path: Path
    v2: bool

    def join(self, pid: int = 0) -> None:
        """Move ``pid`` (0: the calling process) into the cgroup."""
        (self.path / "cgroup.procs").write_text(str(pid or os.getpid()))

    def oom_kills(self) -> int:
        """Processes the OOM killer killed in this cgroup."""
        name = "memory.events" if self.v2 else "memory.oom_control"
        for line in (self.path / name).read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        raise AssertionError(f"no oom_kill count in {self.path / name}")

    def peak_mib(self) -> float | None:
        """The most memory the cgroup held at once (None where the kernel does not say)."""
        name = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        with contextlib.suppress(OSError, ValueError):
            return int((self.path / name).read_text()) / (1024 * 1024)
        return None


def why_no_cgroup() -> str | None:
    """Why a memory cgroup cannot be made here (None: it can)."""
    if not os.path.exists("/proc/self/cgroup"):
        return "not Linux: no cgroups"
    if os.geteuid() != 0:
        return "not root: a memory cgroup needs root to be made"
    if not (ROOT / "memory").is_dir() and "memory" not in _v2_delegated(_own_v2()):
        return "no memory controller delegated to this process's cgroup"
    return None


def _own(controller: str) -> str | None:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(",") or (controller == "" and controllers == ""):
            return path
    return None


def _own_v2() -> Path:
    path = _own("") or "/"
    here = ROOT / path.lstrip("/")
    return here.parent if here != ROOT else ROOT


def _v2_delegated(parent: Path) -> str:
    with contextlib.suppress(OSError):
        return (parent / "cgroup.subtree_control").read_text()
    return ""


@contextlib.contextmanager
def memory_cgroup(limit_mib: int) -> Iterator[MemoryCgroup]:
    """A new cgroup limited to ``limit_mib`` MiB, removed afterwards (once its processes
    are gone)."""
    name = f"lkeval-test-{os.getpid()}-{time.monotonic_ns()}"
    if (ROOT / "memory").is_dir():
        own = ROOT / "memory" / (_own("memory") or "/").lstrip("/")
        base = own if own.is_dir() else ROOT / "memory"
        cgroup = MemoryCgroup(base / name, v2=False)
        cgroup.path.mkdir()
        (cgroup.path / "memory.limit_in_bytes").write_text(str(limit_mib << 20))
    else:
        cgroup = MemoryCgroup(_own_v2() / name, v2=True)
        cgroup.path.mkdir()
        (cgroup.path / "memory.max").write_text(str(limit_mib << 20))
    try:
        yield cgroup
    finally:
        deadline = time.monotonic() + 30
        while True:
            try:
                cgroup.path.rmdir()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
