"""Children of the entrypoint: signals passed on, exit codes kept, orphans reaped.

In the container this process is PID 1, which the kernel shields from every signal it has no
handler for; so it stays the parent, forwards SIGINT/SIGTERM/SIGHUP to its child (which then
writes partial results and exits 130/143) and reaps orphaned processes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

EXIT_INTERNAL = 4
#: Signals passed on to lkeval: Ctrl+C, ``docker stop``/job cancellation, a closed terminal.
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(Exception):
    """A signal arrived before lkeval started (during the install)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class SignalRelay:
    """Passes SIGINT/SIGTERM/SIGHUP on to the running child and remembers them.

    As PID 1 in a container we would otherwise ignore them. The handler only records and
    forwards (it never raises), so a signal that lands while a child is being spawned cannot
    leave that child orphaned: it is forwarded as soon as the child exists.
    """

    def __init__(self) -> None:
        self.received: list[int] = []
        self._child: subprocess.Popen[bytes] | None = None
        self._group = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> SignalRelay:
        self._previous = {sig: signal.signal(sig, self._forward) for sig in FORWARDED_SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _forward(self, signum: int, _frame: object) -> None:
        self.received.append(signum)
        self._send(signum)

    def _send(self, signum: int) -> None:
        child = self._child
        if child is None:
            return
        with contextlib.suppress(ProcessLookupError):  # gone: its exit status is on its way
            if self._group:
                os.killpg(child.pid, signum)
            else:
                os.kill(child.pid, signum)

    def run(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        group: bool,
        stdin: Any = None,
        cwd: Path | None = None,
    ) -> int:
        """Run ``argv`` in its own session; returns its exit code (128 + N if killed by N).

        With ``group`` signals go to its whole process group, else to the child alone.
        """
        if self.received:  # a signal before the start: do not start at all
            return 128 + self.received[0]
        self._group = group
        self._child = subprocess.Popen(
            list(argv), env=dict(env), start_new_session=True, stdin=stdin, cwd=cwd
        )
        try:
            for signum in self.received:  # arrived while the child was being spawned
                self._send(signum)
            code = wait_for(self._child.pid, reap_all=os.getpid() == 1)
            self._child.returncode = code  # reaped by us; keeps Popen from waiting or warning
            return code
        finally:
            self._child = None


def run_lkeval(argv: Sequence[str], env: Mapping[str, str], relay: SignalRelay) -> int:
    """Run ``python -m lkeval argv`` as a child, pass signals on, and return its exit code.

    The child gets its own session so a terminal's Ctrl+C reaches it once, through us, rather
    than twice (lkeval reads a second signal as "stop waiting, kill everything").
    """
    return relay.run([sys.executable, "-m", "lkeval", *argv], env, group=False)


def wait_for(pid: int, *, reap_all: bool) -> int:
    """Wait for ``pid``; as PID 1 also reap any orphan that exits meanwhile (no zombies).

    Returns the exit code, or 128 + N for a child killed by signal N (the shell's convention).
    """
    while True:
        try:
            reaped, status = os.waitpid(-1 if reap_all else pid, 0)
        except ChildProcessError:
            return EXIT_INTERNAL  # someone else reaped it; nothing sensible to report
        if reaped == pid:
            code = os.waitstatus_to_exitcode(status)
            return 128 - code if code < 0 else code
