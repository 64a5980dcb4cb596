"""The forked child's side of warm starts: become what a cold start would be, then run the host.

Part of ``fork_server.py`` (loaded by it, by path, under a private name: stdlib only). A child
of the fork server inherits what a fresh interpreter would not have: the server's signal
handlers and wakeup fd, its descriptors and stdio, its environment, working directory and the
temp dir ``tempfile`` found. Each is reset here, before any agent code runs; then the child
starts its own session (the runner stops it with ``killpg``), dies with the server
(``PR_SET_PDEATHSIG``), and runs ``agent_host.main`` exactly as a cold start does.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any

EXIT_CHILD_SETUP = 70  # the child could not prepare itself (before any agent code ran)
PR_SET_PDEATHSIG = 1


def child_main(
    agent_host: Any,
    argv: list[str],
    env: dict[str, str],
    cwd: str | None,
    log_fd: int,
    sync_w: int,
    server_pid: int,
    control: tuple[int, int],
) -> None:
    """In the forked child: become a process a cold start would be, then run the host
    (``agent_host``, the module the server loaded).

    ``control`` is (the descriptor the channel arrived as, the number the host expects).
    """
    try:
        os.setsid()
        _die_with_parent(server_pid)
        os.close(sync_w)  # tells the server the pid is safe to hand out
        signal.set_wakeup_fd(-1)
        _reset_signals()
        _redirect_stdio(log_fd)
        _close_inherited_fds(keep=control[0])
        if control[0] != control[1]:
            os.dup2(control[0], control[1])
            os.close(control[0])
        os.environ.clear()
        os.environ.update(env)
        _forget_cached_tempdir()
        if cwd:
            os.chdir(cwd)
        sys.argv = [agent_host.__file__, *argv]
    except BaseException:
        traceback.print_exc()
        os._exit(EXIT_CHILD_SETUP)
    agent_host.tree.fast_exit(_run_host(agent_host, argv))


def _run_host(agent_host: Any, argv: list[str]) -> int:
    """``agent_host.main`` as the interpreter would run it: uncaught errors print and exit 1."""
    try:
        agent_host.main(argv)  # leaves through fast_exit on success
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    else:
        return 0
    return 1


def _die_with_parent(server_pid: int) -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != server_pid:  # the server died before the death signal was armed
        os._exit(EXIT_CHILD_SETUP)


def _reset_signals() -> None:
    """The dispositions a fresh interpreter starts with: defaults, Python's SIGINT handler,
    and SIGPIPE/SIGXFSZ ignored (CPython ignores both at start-up)."""
    fresh: dict[int, Callable[..., Any] | int] = {
        signal.SIGINT: signal.default_int_handler,
        signal.SIGPIPE: signal.SIG_IGN,
    }
    if hasattr(signal, "SIGXFSZ"):
        fresh[signal.SIGXFSZ] = signal.SIG_IGN
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            signal.signal(sig, fresh.get(sig, signal.SIG_DFL))
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_SETMASK, set())


def _redirect_stdio(log_fd: int) -> None:
    """stdin from /dev/null, stdout and stderr to the log, unbuffered as PYTHONUNBUFFERED."""
    import io

    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    encoding = sys.stdout.encoding if sys.stdout else "utf-8"

    def stream(fd: int, mode: str, errors: str) -> io.TextIOWrapper:
        raw = io.FileIO(fd, mode, closefd=False)
        buffered: Any = raw if mode == "w" else io.BufferedReader(raw)
        return io.TextIOWrapper(
            buffered,
            encoding=encoding,
            errors=errors,
            line_buffering=mode == "w",
            write_through=mode == "w",
        )

    streams = {
        "stdin": stream(0, "r", "strict"),
        "stdout": stream(1, "w", "strict"),
        "stderr": stream(2, "w", "backslashreplace"),
    }
    for name, value in streams.items():
        for attr in (name, f"__{name}__"):
            # the server's stream objects own fds 0-2 (closefd): freed, they would close
            # the descriptors just redirected. The child never frees them (it os._exit()s).
            _RETIRED.append(getattr(sys, attr))
            setattr(sys, attr, value)


_RETIRED: list[Any] = []


def _forget_cached_tempdir() -> None:
    """``tempfile`` caches the temp dir it found in the server; the agent's TMPDIR differs."""
    tempfile = sys.modules.get("tempfile")
    if tempfile is not None:
        tempfile.tempdir = None  # type: ignore[attr-defined]


def _close_inherited_fds(keep: int) -> None:
    """Close everything but stdio and ``keep``: the server's pipes and anything else a cold
    start lacks."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd > 2 and fd != keep:
            with contextlib.suppress(OSError):
                os.close(fd)
