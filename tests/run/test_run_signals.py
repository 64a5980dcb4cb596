"""SIGINT/SIGTERM during a run are recorded before anything can lose them (issue 19.4).

The cause of a Ctrl-C that was lost early in a run: ``asyncio.run`` turns the first SIGINT into
a cancellation of its main task, and ``asyncio.wait_for`` on Python 3.11 returns the result
instead of raising when the request it waits for completes in the same loop iteration as the
cancellation (the judge preflight waits on its requests that way). The run then went on and
passed. :class:`~lkeval.run.interrupt.RunSignals` raises through the same code and records
the signal first, so even code that absorbs the exception cannot lose it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from lkeval.run.interrupt import Interrupted, RunSignals


async def _judge_answers_as_ctrl_c_comes() -> str:
    """A request completes, and SIGINT arrives, in the same loop iteration."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[str] = loop.create_future()

    def both() -> None:
        answer.set_result("verdict")
        os.kill(os.getpid(), signal.SIGINT)

    loop.call_soon(both)
    return await asyncio.wait_for(answer, timeout=30)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12's wait_for re-raises the cancel")
def test_the_cause_asyncio_run_loses_a_ctrl_c_that_wait_for_absorbs() -> None:
    # What lk-eval ran into on Python 3.11: no KeyboardInterrupt, the result instead.
    assert asyncio.run(_judge_answers_as_ctrl_c_comes()) == "verdict"


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_the_same_code_under_the_runs_handler_is_interrupted(how: signal.Signals) -> None:
    async def main() -> str:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[str] = loop.create_future()

        def both() -> None:
            answer.set_result("verdict")
            os.kill(os.getpid(), how)

        loop.call_soon(both)
        return await asyncio.wait_for(answer, timeout=30)

    with RunSignals(on_second=lambda: None) as signals, pytest.raises(Interrupted) as caught:
        asyncio.run(main())
    assert caught.value.signal == how == signals.received


def test_a_signal_absorbed_by_the_code_that_ran_is_still_the_end_of_the_run() -> None:
    with RunSignals(on_second=lambda: None) as signals:
        with contextlib.suppress(KeyboardInterrupt):  # a library that catches Ctrl-C
            os.kill(os.getpid(), signal.SIGTERM)
        with pytest.raises(Interrupted) as caught:
            signals.check()
    assert caught.value.signal == signal.SIGTERM


def test_while_the_engine_runs_a_signal_cancels_and_a_second_stops_everything() -> None:
    cancelled: list[str] = []
    signals = RunSignals(on_second=lambda: cancelled.append("kill all"))
    with signals, signals.cancelling(lambda: cancelled.append("cancel")):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
    assert cancelled == ["cancel", "kill all"]
    assert signals.received == signal.SIGINT


def test_while_results_are_written_a_signal_is_recorded_not_raised() -> None:
    with RunSignals(on_second=lambda: None) as signals:
        with signals.deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            written = True
        assert written and signals.received == signal.SIGTERM


def test_the_handlers_before_the_run_come_back_after_it() -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    hook = sys.unraisablehook
    with RunSignals(on_second=lambda: None):
        assert signal.getsignal(signal.SIGTERM) not in before
        assert sys.unraisablehook is not hook
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    assert sys.unraisablehook is hook


_FINALIZER_RUN = textwrap.dedent(
    """
    import gc, os, signal, sys
    from lkeval.run.interrupt import Interrupted, RunSignals

    class Client:
        def __del__(self):  # a library's finalizer, e.g. an HTTP client closing its pool
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs between two of these bytecodes
                pass

    class Other:
        def __del__(self):
            raise ValueError("a library's own bug in a finalizer")

    with RunSignals(on_second=lambda: None) as signals:
        Client()  # finalized at once: the signal lands inside __del__
        gc.collect()
        Other()
        try:
            signals.check()
        except Interrupted as exc:
            print("interrupted by", exc.signal.name)
    """
)


def test_a_signal_inside_a_finalizer_prints_no_traceback_and_still_ends_the_run() -> None:
    """CI once showed a Traceback in a run stopped by SIGTERM before its engine (with the
    right exit and partial results): the handler's :class:`Interrupted` raised inside a
    finalizer, which Python prints as "Exception ignored in". The signal still ends the run;
    other finalizers' errors are still reported as Python reports them."""
    proc = subprocess.run(
        [sys.executable, "-c", _FINALIZER_RUN], capture_output=True, text=True, timeout=60
    )
    assert proc.stdout.strip() == "interrupted by SIGTERM", proc.stderr
    assert "Interrupted" not in proc.stderr and "SIGTERM" not in proc.stderr, proc.stderr
    assert proc.stderr.count("Traceback") == 1 and "ValueError" in proc.stderr, proc.stderr
