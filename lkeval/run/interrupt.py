"""SIGINT and SIGTERM during a run: one handler from the first line of the run to its last.

A signal must end a run in every phase, and an ended run still writes what it has: every
scenario not played is "not run (interrupted)", the reports are written, exit 130 (SIGINT) or
143 (SIGTERM). Python's own ways lose signals early in a run: SIGTERM's default kills the
process before anything is written, and ``asyncio.run`` turns the first Ctrl-C into a
cancellation of its main task, which code that absorbs a cancellation (``asyncio.wait_for``
on Python 3.11 when the awaited request completes in the same loop iteration) drops without a
trace, so the run went on and passed. Here the signal is *recorded* first, whatever then
happens to the exception or cancellation it causes, and the run checks the record at the end
of every phase.

How it reaches the code that runs:
- outside the engine (loading, the judge's preflight, the fork server's start), the handler
  raises :class:`Interrupted`, a ``KeyboardInterrupt``, so it goes through event loops and
  blocking waits as Ctrl-C always has;
- while the engine runs, it cancels the engine's task, which then gathers what finished;
- while the results file is written, it is only recorded: the run ends right after.
A second signal stops every agent at once (no more waiting for graceful exits).

A signal can land while a finalizer runs (an object's ``__del__``, a weakref callback, the
garbage collector): Python cannot raise out of those, and prints the exception as "Exception
ignored in ..." with a traceback. The signal is recorded all the same and ends the run at the
next check, so that report is noise in the user's log; :class:`RunSignals` drops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from types import FrameType
from typing import Any, TypeVar

from lkeval.agents.orphans import kill_all_now

SIGNALS = (signal.SIGINT, signal.SIGTERM)
T = TypeVar("T")


class Interrupted(KeyboardInterrupt):
    """A run stopped by a signal outside the engine; carries which one."""

    def __init__(self, sig: signal.Signals) -> None:
        super().__init__(sig.name)
        self.signal = sig


class RunSignals:
    """The run's SIGINT/SIGTERM handler; use as a context manager around the whole run."""

    def __init__(self, on_second: Callable[[], None]) -> None:
        self.received: signal.Signals | None = None
        self._on_second = on_second
        self._cancel: Callable[[], None] | None = None
        self._deferred = False
        self._previous: dict[signal.Signals, Any] = {}
        self._unraisable: Callable[[Any], object] | None = None

    def __enter__(self) -> RunSignals:
        for sig in SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        self._unraisable = sys.unraisablehook
        sys.unraisablehook = self._drop_interrupted
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        if self._unraisable is not None:
            sys.unraisablehook = self._unraisable
            self._unraisable = None

    def _drop_interrupted(self, unraisable: Any) -> None:
        """Our own :class:`Interrupted`, raised inside a finalizer, is already recorded (the
        next :meth:`check` ends the run): not printed. Anything else goes on as before."""
        if isinstance(unraisable.exc_value, Interrupted):
            return
        if self._unraisable is not None:
            self._unraisable(unraisable)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is not None:  # a second signal: no more waiting for graceful exits
            self._on_second()
            return
        self.received = signal.Signals(signum)
        if self._cancel is not None:
            self._cancel()
        elif not self._deferred:
            raise Interrupted(self.received)

    def check(self) -> None:
        """Raise :class:`Interrupted` if a signal came (and was absorbed somewhere)."""
        if self.received is not None:
            raise Interrupted(self.received)

    @contextlib.contextmanager
    def cancelling(self, cancel: Callable[[], None]) -> Iterator[None]:
        """While the engine runs: a signal calls ``cancel`` (thread-safe: it runs in the
        main thread, between two bytecodes of whatever runs, possibly the event loop)."""
        self._cancel = cancel
        try:
            if self.received is not None:
                cancel()
            yield
        finally:
            self._cancel = None

    def run_until_signal(self, work: Callable[[], Awaitable[T]], on_signal: Callable[[], T]) -> T:
        """Run ``work()`` in its own event loop; on SIGINT/SIGTERM stop every agent and return
        ``on_signal()`` (what finished), with :attr:`received` saying which signal came.

        A signal cancels ``work``'s task; one that comes while the loop starts or stops is
        recorded and acted on, never raised where it would lose what finished. What ``work``
        is (the engine playing the scenarios) is the caller's: this class only knows signals.
        """

        async def main() -> T:
            loop = asyncio.get_running_loop()
            task = asyncio.current_task()
            assert task is not None

            def cancel() -> None:
                loop.call_soon_threadsafe(task.cancel)

            with self.cancelling(cancel):
                try:
                    return await work()
                except asyncio.CancelledError:
                    if self.received is None:
                        raise
                    return on_signal()

        with self.deferred():
            try:
                return asyncio.run(main())
            finally:
                kill_all_now()

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """A signal is recorded, not raised, until the block ends (writing the results)."""
        self._deferred = True
        try:
            yield
        finally:
            self._deferred = False
