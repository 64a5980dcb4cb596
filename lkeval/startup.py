"""lk-eval's start-up: its first second, before the run's own machinery is in place.

Two things happen here, both for ``lkeval run``'s first second.

Signals are held (:class:`HeldSignals`, :data:`HELD`) from the first line of ``lkeval``
(:mod:`lkeval.__main__`), before anything of lk-eval is imported: a SIGINT or SIGTERM while
lk-eval imports its command line (~0.5-1 s), starts its fork server or parses its flags is kept
for the run (:class:`~lkeval.run.interrupt.RunSignals` takes it over), which then ends with
every scenario "not run (interrupted)", its reports and its gate line, exit 130/143. Without
it SIGTERM's default killed the process with nothing written, and a Ctrl-C raised in the middle
of an import. What comes before that first line is the interpreter's own start
(``bench/first_second.py``: a bare interpreter's first line comes 0.28 s after its exec at
load 19 on 2 cores, lk-eval's 0.35 s): a signal there ends Python as Python ends.

The cyclic garbage collector is paused while lk-eval imports its command line and then the LLM
stack its judge and caller talk through (livekit-agents, its OpenAI plugin, the OpenAI SDK's
pydantic models): hundreds of thousands of objects, nearly all of them kept for the life of the
process. Each pass the collector makes meanwhile walks the growing heap and frees next to
nothing; paused while they load, the start-up takes ~15% less CPU (``bench/first_agent.py``,
BENCHMARKS.md). The fork server pauses it during its preload for the same reason, with its own
two lines (it imports nothing of lk-eval).

Standard library only, and cheap to import: it runs before everything else.
"""

from __future__ import annotations

import contextlib
import gc
import signal
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def paused_collections() -> Iterator[None]:
    """No cyclic garbage collection inside; the collector's state before is restored after
    (garbage made meanwhile is freed by its next pass, as usual). Nests."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class HeldSignals:
    """SIGINT and SIGTERM kept for the run while lk-eval gets ready.

    The first is recorded (:meth:`take` hands it to the run); a second one calls the
    ``on_second`` clean-up (the fork server started early goes first), gives the handlers
    from before back and is raised again, so it ends the process the way it would have.
    Inside :meth:`interruptible` (a download the run waits for) a signal raises
    ``KeyboardInterrupt`` at once, recorded all the same.
    """

    def __init__(self) -> None:
        self._signal: signal.Signals | None = None
        self._previous: dict[signal.Signals, Any] = {}
        self._on_second: Callable[[], None] = lambda: None
        self._raising = False

    def hold(self, on_second: Callable[[], None] | None = None) -> None:
        """Hold the signals from now on (again: only ``on_second`` changes)."""
        if on_second is not None:
            self._on_second = on_second
        if not self._previous:
            for sig in HELD_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)

    @property
    def holding(self) -> bool:
        """Whether the handlers are in place."""
        return bool(self._previous)

    @property
    def pending(self) -> bool:
        """Whether a signal came that the run has not taken yet."""
        return self._signal is not None

    def take(self) -> signal.Signals | None:
        """The signal that came meanwhile, once (the next one counts as a first again)."""
        sig, self._signal = self._signal, None
        return sig

    def release(self) -> None:
        """The handlers from before :meth:`hold` are back. Idempotent."""
        previous, self._previous = self._previous, {}
        for sig, handler in previous.items():
            with contextlib.suppress(ValueError, TypeError):  # not the main thread
                signal.signal(sig, handler)

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        """A signal, held already or coming inside, raises ``KeyboardInterrupt`` here (and
        stays recorded for the run)."""
        if self._signal is not None:
            raise KeyboardInterrupt(self._signal.name)
        self._raising = True
        try:
            yield
        finally:
            self._raising = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._signal is None:
            self._signal = signal.Signals(signum)
            if self._raising:
                raise KeyboardInterrupt(self._signal.name)
            return
        self._on_second()
        self.release()
        signal.raise_signal(signum)


#: The process's one: ``lkeval run``'s first line holds it, the run takes it over.
HELD = HeldSignals()

__all__ = ["HELD", "HELD_SIGNALS", "HeldSignals", "paused_collections"]
