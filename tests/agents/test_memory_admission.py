"""The run's memory plan (lkeval/agents/memory.py): what is available, read from the files a
cgroup (v1 or v2) and /proc give, and the admission of agents while they fit together. The
real bound, a cgroup of 4 GiB made on this machine, is tests/e2e/test_memory_plan.py."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pytest

from lkeval.agents import memory
from lkeval.agents.memory import Headroom, MemoryPlan, headroom, oom_kills

MIB = 1024 * 1024


def _proc(tmp_path: Path, cgroup: str, available_mib: int = 20_000) -> Path:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text(cgroup)
    (proc / "meminfo").write_text(
        f"MemTotal: 99999999 kB\nMemAvailable: {available_mib * 1024} kB\n"
    )
    (proc / "vmstat").write_text("pgfault 12\noom_kill 3\n")
    return proc


def _write(where: Path, **files: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (where / name.replace("_", ".", 1)).write_text(text)


def test_without_a_limit_it_is_mem_available(tmp_path: Path) -> None:
    proc = _proc(tmp_path, "0::/user.slice\n")
    _write(tmp_path / "cg" / "user.slice", memory_max="max\n", memory_current="1000\n")
    assert headroom(proc, tmp_path / "cg") == Headroom(20_000, "MemAvailable 20000 MiB")


def test_a_v2_limit_less_its_usage_bounds_it_and_reclaimable_cache_counts_free(
    tmp_path: Path,
) -> None:
    proc = _proc(tmp_path, "0::/ci/job\n")
    _write(tmp_path / "cg" / "ci", memory_max=f"{8192 * MIB}\n", memory_current=f"{100 * MIB}\n")
    _write(
        tmp_path / "cg" / "ci" / "job",
        memory_max=f"{4096 * MIB}\n",
        memory_current=f"{1500 * MIB}\n",
        memory_stat=f"anon 1\ninactive_file {500 * MIB}\n",
    )
    room = headroom(proc, tmp_path / "cg")
    assert room == Headroom(3096, "the memory cgroup's memory.max 4096 MiB (3096 MiB free)")


def test_a_limit_on_a_parent_cgroup_bounds_it_too(tmp_path: Path) -> None:
    proc = _proc(tmp_path, "0::/ci/job\n")
    _write(tmp_path / "cg" / "ci", memory_max=f"{2048 * MIB}\n", memory_current=f"{1024 * MIB}\n")
    _write(tmp_path / "cg" / "ci" / "job", memory_max="max\n", memory_current="0\n")
    assert headroom(proc, tmp_path / "cg").mib == 1024  # type: ignore[union-attr]


def test_a_v1_memory_cgroup_is_read_and_its_no_limit_ignored(tmp_path: Path) -> None:
    proc = _proc(tmp_path, "5:cpu:/\n4:memory:/docker/abc\n0::/\n", available_mib=9000)
    _write(
        tmp_path / "cg" / "memory" / "docker" / "abc",
        memory_limit_in_bytes=f"{4096 * MIB}\n",
        memory_usage_in_bytes=f"{2048 * MIB}\n",
        memory_stat=f"cache 5\ntotal_inactive_file {48 * MIB}\n",
    )
    _write(tmp_path / "cg" / "memory", memory_limit_in_bytes="9223372036854771712\n")
    room = headroom(proc, tmp_path / "cg")
    assert room == Headroom(
        2096, "the memory cgroup's memory.limit_in_bytes 4096 MiB (2096 MiB free)"
    )


def test_a_container_that_sees_its_cgroup_as_the_root(tmp_path: Path) -> None:
    proc = _proc(tmp_path, "0::/../../kubepods/pod1\n")  # not under this cgroupfs
    _write(tmp_path / "cg", memory_max=f"{1024 * MIB}\n", memory_current=f"{24 * MIB}\n")
    assert headroom(proc, tmp_path / "cg").mib == 1000  # type: ignore[union-attr]


def test_the_oom_kill_count_is_the_kernels(tmp_path: Path) -> None:
    assert oom_kills(_proc(tmp_path, "0::/\n")) == 3
    assert oom_kills(tmp_path / "nowhere") is None


@dataclass
class _Agent:
    pid: int | None
    prepared: bool = False


def _slots(plan: MemoryPlan, agents: list[_Agent], wanted: int) -> asyncio.Future[list[int]]:
    """Ask for ``wanted`` places at once; each admitted one spawns an agent (unprepared)."""
    admitted: list[int] = []
    release = asyncio.Event()

    async def one(k: int) -> None:
        async with plan.slot():
            admitted.append(k)
            agents.append(_Agent(pid=100 + k))
            await release.wait()

    async def run() -> list[int]:
        tasks = [asyncio.ensure_future(one(k)) for k in range(wanted)]
        await asyncio.sleep(0.5)
        first = list(admitted)
        for agent in agents:
            agent.prepared = True  # measured from now on
        await asyncio.sleep(0.5)
        counts = [len(first), len(admitted)]
        release.set()
        await asyncio.gather(*tasks)
        return counts

    return asyncio.ensure_future(run())


def test_the_first_agent_alone_then_as_many_as_fit_at_the_largest_measured() -> None:
    """Before any agent is measured only one is admitted (what one costs is unknown); once
    measured at 300 MiB, 1000 MiB x 0.75 admits two (three would be 900 MiB)."""
    agents: list[_Agent] = []
    sizes = {100: 300.0, 101: 120.0}
    plan = MemoryPlan(Headroom(1000, "test"), lambda: agents, 0.75, lambda pid: sizes.get(pid))

    async def main() -> list[int]:
        return await _slots(plan, agents, 6)

    assert asyncio.run(main()) == [1, 2]
    assert plan.largest_mib == 300.0 and plan.most_at_once == 2
    assert plan.summary().startswith("memory: at most 2 agents at once (the largest measured 300")


def test_a_roomy_machine_admits_all_once_the_first_is_measured() -> None:
    agents: list[_Agent] = []
    plan = MemoryPlan(Headroom(100_000, "test"), lambda: agents, 0.75, lambda pid: 50.0)

    async def main() -> list[int]:
        return await _slots(plan, agents, 6)

    assert asyncio.run(main()) == [1, 6]  # held back only until the first was measured
    assert plan.summary() == ""  # memory never bounded it: nothing to say at the end
    assert "75% of 100000 MiB available: test" in plan.describe()


@pytest.mark.parametrize("unknown", [None, 0.0])
def test_agents_that_cannot_be_measured_run_one_at_a_time(unknown: float | None) -> None:
    agents: list[_Agent] = []
    plan = MemoryPlan(Headroom(1000, "test"), lambda: agents, 0.75, lambda pid: unknown)

    async def main() -> list[int]:
        return await _slots(plan, agents, 3)

    assert asyncio.run(main()) == [1, 1]


def test_a_first_agent_that_never_prepares_holds_the_others_back_only_so_long(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A first agent that hangs in its boot (until its boot timeout) must not serialize the
    run: after FIRST_MEASURE_SECONDS the others count at the default budget each."""
    monkeypatch.setattr(memory, "FIRST_MEASURE_SECONDS", 0.3)
    agents: list[_Agent] = []
    plan = MemoryPlan(Headroom(1000, "test"), lambda: agents, 0.75, lambda pid: 300.0)

    async def main() -> int:
        release = asyncio.Event()

        async def one() -> None:
            async with plan.slot():
                agents.append(_Agent(pid=200 + len(agents)))  # never prepared
                await release.wait()

        tasks = [asyncio.ensure_future(one()) for _ in range(5)]
        await asyncio.sleep(1.0)
        held = plan.most_at_once
        release.set()
        await asyncio.gather(*tasks)
        return held

    assert asyncio.run(main()) == 2  # 750 MiB at 256 MiB each: two, not one, not five
