"""The run's concurrency: a place for each attempt from before its agent boots to after it
stops, traded for a conversation slot when the agent is prepared (:class:`AgentSlots`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

from lkeval import defaults

Admission = Callable[[], AbstractAsyncContextManager[None]]
"""A place for one more agent, held from before its boot to after its stop: the run's memory
plan (:class:`lkeval.agents.memory.MemoryPlan`), which waits while another would not fit."""


class AgentSlots:
    """The run's concurrency: N conversations at once, and up to P more agents being prepared
    (or prepared and waiting to talk), P = :func:`lkeval.defaults.prepared_agents` (N on a
    small run; a few per core on a large one). Boots then overlap conversations instead of
    queueing behind them, while the number of live agents stays bounded (N + P): a prepared
    agent needs only cover a boot (~0.3 s warm), not a conversation. Of the P, at most B boot
    at once (:func:`lkeval.defaults.booting_agents`): a boot is CPU-bound and would take the
    cores from the turns of the conversations in flight. A boot stops counting against B
    once its agent is prepared, or ``boot_window`` seconds after it began (what is left of
    it waits, not computes). A prepared agent has imported its code, started its server
    and run its entrypoint up to its session's start, but not the session: that starts when
    :meth:`_SlotHandle.converse` returns, so waiting for a slot cannot change a transcript
    (no greeting, idle nudge or away timer runs before its conversation can start)."""

    def __init__(
        self,
        n: int,
        prepared: int | None = None,
        booting: int | None = None,
        boot_window: float = defaults.BOOT_CPU_WINDOW,
        admission: Admission | None = None,
    ) -> None:
        self._ready = asyncio.Semaphore(prepared if prepared is not None else n)
        self._booting = asyncio.Semaphore(booting or (prepared if prepared is not None else n))
        self._talk = asyncio.Semaphore(n)
        self._boot_window = boot_window
        self._admission = admission

    @contextlib.asynccontextmanager
    async def attempt(self) -> AsyncIterator[_SlotHandle]:
        """Hold a prepared slot and a booting one now; the handle trades them for a
        conversation slot. With an admission (the run's memory plan), its place is held
        too, from before the boot until the attempt is over (its agent stopped)."""
        await self._ready.acquire()
        handle = _SlotHandle(self._ready, self._talk)
        try:
            async with self._admission() if self._admission else contextlib.nullcontext():
                await self._booting.acquire()
                handle.boot(self._booting, self._boot_window)
                yield handle
        finally:
            handle.release()


class _SlotHandle:
    def __init__(self, ready: asyncio.Semaphore, talk: asyncio.Semaphore) -> None:
        self._ready: asyncio.Semaphore | None = ready
        self._talk_sem = talk
        self._talk: asyncio.Semaphore | None = None
        self._booting: asyncio.Semaphore | None = None
        self._boot_timer: asyncio.TimerHandle | None = None

    def boot(self, booting: asyncio.Semaphore, window: float) -> None:
        """Count as booting until prepared, ``window`` seconds at the most."""
        self._booting = booting
        self._boot_timer = asyncio.get_running_loop().call_later(window, self._booted)

    def _booted(self) -> None:
        if self._boot_timer is not None:
            self._boot_timer.cancel()
            self._boot_timer = None
        if self._booting is not None:
            self._booting.release()
            self._booting = None

    async def converse(self) -> None:
        """Trade the prepared slot for a conversation slot (waits while N agents talk)."""
        self._booted()
        if self._talk is None and self._ready is not None:
            await self._talk_sem.acquire()
            self._talk = self._talk_sem
            self._ready.release()
            self._ready = None

    def release(self) -> None:
        self._booted()
        for sem in (self._ready, self._talk):
            if sem is not None:
                sem.release()
        self._ready = self._talk = None


__all__ = ["Admission", "AgentSlots"]
