"""The default concurrency and the bound on prepared agents, from what a scenario costs."""

from __future__ import annotations

import asyncio

import pytest

from lkeval import defaults
from lkeval.run.engine import AgentSlots


@pytest.fixture
def plenty_of_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(defaults, "_available_mib", lambda: 64 * 1024)


@pytest.mark.usefixtures("plenty_of_memory")
def test_warm_starts_default_to_many_conversations_and_cold_to_the_cores() -> None:
    assert defaults.default_concurrency(warm=True, cores=2) == 16
    assert defaults.default_concurrency(warm=True, cores=1) == 8
    assert defaults.default_concurrency(warm=True, cores=64) == 16
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
