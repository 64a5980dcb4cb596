"""The default concurrency and the bounds on prepared and booting agents, from what a
scenario costs."""

from __future__ import annotations

import asyncio

import pytest
from test_engine import Quiet, scenario

from lkeval import defaults
from lkeval.results.model import Attempt
from lkeval.run.attempt import Slot
from lkeval.run.engine import AgentSlots, AttemptRunner, Engine, EngineOptions
from lkeval.scenarios.model import Scenario


@pytest.fixture
def plenty_of_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(defaults, "_available_mib", lambda: 64 * 1024)


@pytest.mark.usefixtures("plenty_of_memory")
def test_warm_starts_default_to_many_conversations_and_cold_to_the_cores() -> None:
    assert defaults.default_concurrency(warm=True, cores=2) == 32
    assert defaults.default_concurrency(warm=True, cores=1) == 16
    assert defaults.default_concurrency(warm=True, cores=64) == 32
    assert defaults.default_concurrency(warm=False, cores=2) == 2
    assert defaults.default_concurrency(warm=False, cores=64) == 4


def test_the_warm_default_fits_the_available_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    # 2 GiB: 8 agents' budget, of which 4 are prepared ones on 2 cores
    monkeypatch.setattr(defaults, "_available_mib", lambda: 2048)
    assert defaults.default_concurrency(warm=True, cores=2) == 4
    monkeypatch.setattr(defaults, "_available_mib", lambda: 100)
    assert defaults.default_concurrency(warm=True, cores=2) == 1


def test_prepared_agents_are_as_many_as_conversations_on_a_small_run_two_per_core_beyond() -> None:
    assert defaults.prepared_agents(2, cores=2) == 2
    assert defaults.prepared_agents(4, cores=2) == 4
    assert defaults.prepared_agents(32, cores=2) == 4
    assert defaults.prepared_agents(32, cores=8) == 16
    assert defaults.prepared_agents(1, cores=1) == 1


def test_at_most_the_bound_of_agents_are_prepared_while_all_slots_talk() -> None:
    """c=8 with 2 prepared: 8 conversations at once, never more than 2 agents waiting."""
    counts = {"preparing": 0, "talking": 0}
    peaks = {"preparing": 0, "talking": 0}

    def enter(state: str) -> None:
        counts[state] += 1
        peaks[state] = max(peaks[state], counts[state])

    async def attempt(slots: AgentSlots, n: int) -> None:
        async with slots.attempt() as slot:
            enter("preparing")
            await asyncio.sleep(0.001)
            await slot.converse()
            counts["preparing"] -= 1
            enter("talking")
            await asyncio.sleep(0.01 * (n % 3 + 1))
            counts["talking"] -= 1

    async def main() -> None:
        slots = AgentSlots(8, prepared=2)
        await asyncio.gather(*(attempt(slots, n) for n in range(40)))

    asyncio.run(main())
    assert peaks == {"preparing": 2, "talking": 8}


def test_warm_boots_go_one_per_two_cores_and_cold_ones_one_per_prepared_agent() -> None:
    assert defaults.booting_agents(32, warm=True, cores=2) == 1
    assert defaults.booting_agents(32, warm=True, cores=1) == 1
    assert defaults.booting_agents(32, warm=True, cores=8) == 4
    assert defaults.booting_agents(2, warm=True, cores=64) == 2  # never more than prepared
    assert defaults.booting_agents(1, warm=True, cores=2) == 1
    assert defaults.booting_agents(32, warm=False, cores=2) == defaults.prepared_agents(32, 2)
    assert defaults.booting_agents(2, warm=False, cores=2) == 2


class _Boots:
    """Fake attempts that count how many are booting (before their slot's ``converse``)."""

    def __init__(self) -> None:
        self.booting = self.peak = 0

    def __call__(self, s: Scenario, attempt_no: int) -> AttemptRunner:
        return _BootingAttempt(self)


class _BootingAttempt:
    interrupted: Attempt | None = None
    agent_cause: str | None = None

    def __init__(self, boots: _Boots) -> None:
        self.boots = boots

    async def run(self, slot: Slot | None = None) -> Attempt:
        assert slot is not None
        self.boots.booting += 1
        self.boots.peak = max(self.boots.peak, self.boots.booting)
        await asyncio.sleep(0.005)  # the fork, the entrypoint, the server's start
        self.boots.booting -= 1
        await slot.converse()
        await asyncio.sleep(0.02)
        return Attempt(status="passed")


@pytest.mark.parametrize(("warm", "peak"), [(True, 1), (False, 4)])
def test_the_engine_boots_warm_agents_one_per_two_cores_and_cold_ones_as_prepared(
    monkeypatch: pytest.MonkeyPatch, warm: bool, peak: int
) -> None:
    """c=8 on 2 cores: 4 prepared agents; warm, one boots at a time (a boot is CPU-bound and
    takes the cores from the turns in flight); cold, all four (nothing else to share with)."""
    monkeypatch.setattr(defaults.os, "cpu_count", lambda: 2)
    boots = _Boots()
    options = EngineOptions(concurrency=8, repeat=1, warm_starts=warm)
    engine = Engine(boots, Quiet(), options)
    results = asyncio.run(engine.run([scenario(f"s-{n}") for n in range(1, 17)]))
    assert [r.status for r in results] == ["passed"] * 16
    assert boots.peak == peak


def test_a_boot_that_outlasts_its_window_lets_the_next_one_start() -> None:
    """An agent whose entrypoint waits (on the network, a lock) past the boot window is not
    computing: the next boot starts instead of queueing behind it, so one slow entrypoint does
    not serialise the run. The first boot is released only once the second has begun: without
    the window this deadlocks (caught by the timeout)."""

    async def main() -> list[str]:
        began = asyncio.Event()
        order: list[str] = []
        slots = AgentSlots(2, prepared=2, booting=1, boot_window=0.05)

        async def slow() -> None:
            async with slots.attempt() as slot:
                order.append("slow boot begins")
                await began.wait()
                await slot.converse()
                order.append("slow talks")

        async def quick() -> None:
            await asyncio.sleep(0.01)  # the slow one holds the booting slot first
            async with slots.attempt() as slot:
                order.append("quick boot begins")
                began.set()
                await slot.converse()
                order.append("quick talks")

        await asyncio.wait_for(asyncio.gather(slow(), quick()), timeout=10)
        return order

    order = asyncio.run(main())
    assert order[:2] == ["slow boot begins", "quick boot begins"]


def test_a_boot_within_its_window_holds_the_next_one_back() -> None:
    """The bound itself: with one booting slot, a second boot begins only once the first
    agent is prepared (it asked for its conversation slot)."""

    async def main() -> list[str]:
        order: list[str] = []
        slots = AgentSlots(2, prepared=2, booting=1, boot_window=60)

        async def boot(name: str, delay: float) -> None:
            await asyncio.sleep(delay)
            async with slots.attempt() as slot:
                order.append(f"{name} boot begins")
                await asyncio.sleep(0.05)
                order.append(f"{name} prepared")
                await slot.converse()

        await asyncio.gather(boot("first", 0), boot("second", 0.01))
        return order

    assert asyncio.run(main()) == [
        "first boot begins",
        "first prepared",
        "second boot begins",
        "second prepared",
    ]


def test_an_attempt_cancelled_while_it_waits_to_boot_gives_back_its_prepared_slot() -> None:
    """A run cut short while attempts queue for the booting slot leaves no slot held."""

    async def main() -> bool:
        slots = AgentSlots(1, prepared=1, booting=1)
        hold = asyncio.Event()

        async def first() -> None:
            async with slots.attempt() as slot:
                await hold.wait()
                await slot.converse()

        async def waiting() -> None:
            async with slots.attempt():
                pass

        t1 = asyncio.ensure_future(first())
        await asyncio.sleep(0.01)
        t2 = asyncio.ensure_future(waiting())
        await asyncio.sleep(0.01)
        t2.cancel()
        hold.set()
        await t1
        await asyncio.gather(t2, return_exceptions=True)
        # every slot is free again: a new attempt gets through at once
        async with slots.attempt() as slot:
            await slot.converse()
        return True

    assert asyncio.run(asyncio.wait_for(main(), timeout=10))
