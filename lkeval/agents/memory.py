"""The run's memory as a whole: how many agents may live at once so that they fit together.

``--agent-memory`` bounds one agent; this bounds them all. A run of many heavy agents (an
ONNX model, a tokenizer each) at the default concurrency would otherwise take more memory than
the machine, or its container's memory cgroup, has, and the kernel's OOM killer picks victims
mid-conversation (lk-eval itself among them, and then no result survives).

So the run plans its agents against what is available when its engine starts
(:func:`headroom`: a cgroup's ``memory.max`` less ``memory.current``, v2 or v1, where one is
set, else ``MemAvailable``), of which the agents together may take :data:`MEMORY_SHARE`. What
one agent takes is measured, not guessed: the first agent is admitted alone, and more only
once an agent has been measured prepared (its code imported, its entrypoint run; a first
agent that hangs in its boot holds the others back :data:`FIRST_MEASURE_SECONDS` at most);
from then on each agent counts as the largest measured so far (its proportional set size,
so the pages warm agents share with the fork server count once), and another is admitted
only while one more of those fits (:class:`MemoryPlan`). Measuring reads
``/proc/PID/smaps_rollup``, which walks the agent's page tables (a few ms), so each agent is
read when it is prepared and then at most every :data:`REMEASURE_SECONDS`, and only while an
admission is being decided.

An agent the OOM killer ends anyway is told apart from other SIGKILLs by the kernel's own count
of OOM kills (:func:`oom_kills`, ``/proc/vmstat``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from lkeval import defaults

MEMORY_SHARE = defaults.AGENTS_MEMORY_SHARE
REMEASURE_SECONDS = 10.0
#: How long the first agent may take to be prepared (measured) before the others stop waiting
#: for it and count as :data:`~lkeval.defaults.AGENT_BUDGET_MIB` each until one is measured.
FIRST_MEASURE_SECONDS = 10.0
_POLL = 0.2
_MIB = 1024 * 1024
_NO_LIMIT = 1 << 60  # cgroup v1 writes "no limit" as a huge number near 2**63


@dataclass(frozen=True)
class Headroom:
    """Memory the run may use, in MiB, and what bounded it (for the run's first lines)."""

    mib: int
    source: str


def headroom(
    proc: Path = Path("/proc"), cgroup_root: Path = Path("/sys/fs/cgroup")
) -> Headroom | None:
    """The tightest of: each memory cgroup lk-eval is in (and their parents) with a limit,
    its limit less what it holds (less its inactive file cache, which the kernel reclaims
    first); and ``MemAvailable``. None where neither can be read (not Linux)."""
    found: list[Headroom] = []
    with contextlib.suppress(OSError, ValueError):
        found += _cgroup_headroom((proc / "self" / "cgroup").read_text(), cgroup_root)
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in (proc / "meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                kib = int(line.split()[1])
                found.append(Headroom(kib // 1024, f"MemAvailable {kib // 1024} MiB"))
    return min(found, key=lambda h: h.mib) if found else None


def _cgroup_headroom(membership: str, root: Path) -> list[Headroom]:
    """One :class:`Headroom` per limited memory cgroup on lk-eval's path (v2 ``0::/path``,
    v1 ``N:memory:/path``), the cgroup itself and each parent up to the root."""
    out = []
    for line in membership.splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            base, names = root, ("memory.max", "memory.current", "inactive_file")
        elif "memory" in controllers.split(","):
            base = root / "memory"
            names = ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
        else:
            continue
        here = base / path.lstrip("/")
        if not here.is_dir():  # a namespaced container sees its own cgroup as the root
            here = base
        while True:
            room = _limited(here, *names)
            if room is not None:
                out.append(room)
            if here == base:
                break
            here = here.parent
    return out


def _limited(where: Path, limit_name: str, usage_name: str, inactive: str) -> Headroom | None:
    try:
        limit_text = (where / limit_name).read_text().strip()
        if limit_text == "max" or int(limit_text) >= _NO_LIMIT:
            return None
        limit, usage = int(limit_text), int((where / usage_name).read_text())
    except (OSError, ValueError):
        return None
    with contextlib.suppress(OSError, ValueError):
        for line in (where / "memory.stat").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == inactive:
                usage -= int(value)
    free = max(0, limit - max(0, usage)) // _MIB
    kind = "memory.max" if limit_name == "memory.max" else "memory.limit_in_bytes"
    return Headroom(free, f"the memory cgroup's {kind} {limit // _MIB} MiB ({free} MiB free)")


def agent_mib(pid: int) -> float | None:
    """The agent process's proportional set size in MiB (shared pages divided among those who
    map them), its resident size where that cannot be read; None once it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / _MIB
    except (OSError, ValueError, IndexError):
        return None


def oom_kills(proc: Path = Path("/proc")) -> int | None:
    """Processes the kernel's OOM killer has killed since boot (any cgroup), or None."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in (proc / "vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    return None


class LiveAgent(Protocol):
    """What the plan reads of a live agent (:class:`~lkeval.agents.process.AgentProcess`)."""

    @property
    def pid(self) -> int | None: ...

    @property
    def prepared(self) -> bool: ...


class MemoryPlan:
    """Admits agents while they fit together in ``share`` of ``room`` (see the module)."""

    def __init__(
        self,
        room: Headroom,
        agents: Callable[[], Iterable[LiveAgent]],
        share: float = MEMORY_SHARE,
        measure: Callable[[int], float | None] = agent_mib,
    ) -> None:
        self.room = room
        self.budget_mib = room.mib * share
        self.share = share
        self._agents = agents
        self._measure = measure
        self._held = 0
        self._seen: dict[int, tuple[float, float]] = {}  # pid -> (peak MiB, when read)
        self.largest_mib = 0.0
        self.most_at_once = 0
        self.held_back = 0  # times an agent had to wait because another would not fit
        self._first = 0.0  # when the first agent was admitted
        self._reading: asyncio.Future[None] | None = None

    def describe(self) -> str:
        """The run's line saying what bounds its agents' memory."""
        return (
            f"memory: agents together up to {self.budget_mib:.0f} MiB ({self.share:.0%} of "
            f"{self.room.mib} MiB available: {self.room.source}); each counted at the largest "
            "measured, another starts only while one more fits"
        )

    def summary(self) -> str:
        """What the plan did, once the run is over ("" when memory never held an agent back:
        waiting for the first agent's measurement does not count)."""
        if not self.held_back:
            return ""
        return (
            f"memory: at most {self.most_at_once} agents at once (the largest measured "
            f"{self.largest_mib:.0f} MiB, {self.budget_mib:.0f} MiB for all)"
        )

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a place for one agent from before its boot to after its stop."""
        while not await self._fits():
            await asyncio.sleep(_POLL)
        self._held += 1
        self.most_at_once = max(self.most_at_once, self._held)
        try:
            yield
        finally:
            self._held -= 1

    async def _fits(self) -> bool:
        """Whether one more agent fits: always the first; then only once one was measured
        (or, when none is prepared within :data:`FIRST_MEASURE_SECONDS`, a first agent
        that hangs in its boot, at :data:`~lkeval.defaults.AGENT_BUDGET_MIB` each)."""
        if self._held == 0:
            self._first = self._first or time.monotonic()
            return True
        await self._refresh()
        now = time.monotonic()
        largest = self.largest_mib
        if largest <= 0 and now - (self._first or now) > FIRST_MEASURE_SECONDS:
            largest = float(defaults.AGENT_BUDGET_MIB)
        if largest <= 0:
            return False  # the first agent is not measured yet: it says what one costs
        fits = (self._held + 1) * largest <= self.budget_mib
        self.held_back += not fits
        return fits

    async def _refresh(self) -> None:
        """:meth:`_read` in a thread (a read walks page tables: never on the event loop that
        carries every conversation's turns), one at a time for all the waiters."""
        if self._reading is None or self._reading.done():
            self._reading = asyncio.ensure_future(asyncio.to_thread(self._read))
        await asyncio.shield(self._reading)

    def _read(self) -> None:
        """Measure the prepared agents not read for :data:`REMEASURE_SECONDS`."""
        now = time.monotonic()
        live = set()
        for agent in list(self._agents()):
            pid = agent.pid
            if pid is None or not agent.prepared:
                continue
            live.add(pid)
            peak, when = self._seen.get(pid, (0.0, -REMEASURE_SECONDS))
            if now - when < REMEASURE_SECONDS:
                continue
            mib = self._measure(pid)
            if mib is not None:
                peak = max(peak, mib)
                self.largest_mib = max(self.largest_mib, peak)
            self._seen[pid] = (peak, now)
        for gone in set(self._seen) - live:
            del self._seen[gone]


__all__ = [
    "MEMORY_SHARE",
    "Headroom",
    "LiveAgent",
    "MemoryPlan",
    "agent_mib",
    "headroom",
    "oom_kills",
]
