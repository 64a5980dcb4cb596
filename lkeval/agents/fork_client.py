"""The runner's side of warm starts: one fork server per run, one forked agent per scenario.

``lkeval/host/fork_server.py`` runs under the agent's interpreter, imports the framework once and
forks a child per scenario (see its docstring for the rules it keeps). This module starts it,
hands it spawn requests (each agent's control channel travels with its request, as a file
descriptor over a Unix socket), and turns its exit reports into process objects with the
surface of :class:`~lkeval.agents.interface.AgentProc`: ``pid``, ``returncode`` and ``async
wait()``. The runner cannot ``waitpid`` a process it did not start, so the exit status comes
from the server, which reaps its children.

The client is not bound to an event loop: a reader thread owns the server's stdout and hands
results to whichever loop asked (``call_soon_threadsafe``). So the run command can start the
server before its loop runs and close it in a ``finally`` after the loop is gone, and tests
can use one server across several ``asyncio.run`` calls.

The server runs in its own session, so a Ctrl-C in the terminal reaches the runner only: the
runner then stops each agent gracefully. The children die with the server (PR_SET_PDEATHSIG),
and each one dies, with its whole tree, when the runner's end of its control channel closes,
so even a runner killed with SIGKILL leaves no agent behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from typing import IO, Any, Literal

from lkeval.agents.fork_start import (
    SERVER_SCRIPT,
    ForkServerError,
    ServerProcess,
    start_server_process,
)
from lkeval.agents.interface import SpawnRequest

# Variables the interpreter reads only at start-up: a forked child cannot take new values of
# these from its environment, so an agent that needs other ones is started cold.
STARTUP_ONLY_ENV = (
    "PYTHONPATH",
    "PYTHONHASHSEED",
    "PYTHONHOME",
    "PYTHONSAFEPATH",
    "PYTHONNOUSERSITE",
    "PYTHONUSERBASE",
    "PYTHONPLATLIBDIR",
    "PYTHONMALLOC",
    "PYTHONDEVMODE",
    "PYTHONWARNINGS",
    "PYTHONUTF8",
    "PYTHONIOENCODING",
    "PYTHONOPTIMIZE",
    "PYTHONINTMAXSTRDIGITS",
    "PYTHONNODEBUGRANGES",
    "PYTHONFROZENMODULES",
    "PYTHONPYCACHEPREFIX",
    "PYTHONDONTWRITEBYTECODE",
)


class ForkedProcess:
    """An agent forked by the server; quacks like ``asyncio.subprocess.Process`` for waiting.

    ``returncode`` follows ``subprocess``: the exit code, or minus the signal number.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._lock = threading.Lock()
        self._futures: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[int]]] = []

    async def wait(self) -> int:
        """Wait for the exit report; cancelling a waiter never cancels the others."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self.returncode is not None:
                return self.returncode
            fut = next((f for lp, f in self._futures if lp is loop), None)
            if fut is None:
                fut = loop.create_future()
                self._futures.append((loop, fut))
        return await asyncio.shield(fut)

    def _exited(self, returncode: int) -> None:
        """Called from the reader thread."""
        with self._lock:
            self.returncode = returncode
            futures, self._futures = self._futures, []
        for loop, fut in futures:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                loop.call_soon_threadsafe(_resolve, fut, returncode)

    def __repr__(self) -> str:
        return f"<ForkedProcess pid={self.pid} returncode={self.returncode}>"


def _resolve(fut: asyncio.Future[Any], value: Any) -> None:
    if not fut.done():
        fut.set_result(value)


def _deliver_child(fut: asyncio.Future[ForkedProcess], child: ForkedProcess) -> None:
    if fut.done():  # the spawn timed out or was cancelled: nobody will ever stop this child
        _kill_group(child.pid)
    else:
        fut.set_result(child)


def _fail(fut: asyncio.Future[Any], exc: BaseException) -> None:
    if not fut.done():
        fut.set_exception(exc)


class ForkServer:
    """A running fork server; create with :meth:`start`, end with :meth:`close`."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        stderr: IO[bytes] | None,
        env: Mapping[str, str],
        fd_channel: socket.socket,
    ) -> None:
        self._proc = proc
        self._fd_channel = fd_channel
        self._startup_env = {k: env.get(k) for k in STARTUP_ONLY_ENV}
        self._stderr = stderr
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._pending: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]]] = {}
        self._children: dict[int, ForkedProcess] = {}
        self._ready = threading.Event()
        self.info: dict[str, Any] = {}
        self.unsupported: str | None = None
        self.dead_reason: str | None = None
        self.ready_seconds = 0.0
        self._started = time.monotonic()
        self._reader = threading.Thread(
            target=self._read_loop, name="lkeval-fork-server", daemon=True
        )
        self._reader.start()

    @classmethod
    def start(
        cls, python: str, env: Mapping[str, str], *, ready_timeout: float = 120.0, **where: Any
    ) -> ForkServer:
        """Start the server and wait until it has preloaded (blocking: ~1-3 s of its CPU).

        :meth:`begin` (``where``: its keywords) then :meth:`wait_ready`; see there. Raises
        :class:`ForkServerError` with the reason when warm starts cannot work.
        """
        server = cls.begin(python, env, **where)
        server.wait_ready(ready_timeout)
        return server

    @classmethod
    def begin(cls, python: str, env: Mapping[str, str], **where: Any) -> ForkServer:
        """Start the server without waiting for its preload: the caller does other work
        meanwhile (the run's judge preflight) and then calls :meth:`wait_ready`, or
        :meth:`kill` when it no longer needs it.

        ``env`` is the environment a cold agent would get: import-time code in the preloaded
        framework sees the same values. ``where`` is
        :func:`~lkeval.agents.fork_start.start_server_process`'s keywords (``cwd``, ``agent``,
        ``log_path``, ``log_is_raw``). Raises :class:`ForkServerError` when the interpreter
        cannot be started.
        """
        return cls.adopt(start_server_process(python, env, script=SERVER_SCRIPT, **where), env)

    @classmethod
    def adopt(cls, started: ServerProcess, env: Mapping[str, str]) -> ForkServer:
        """The client of a server process started earlier (:mod:`lkeval.agents.fork_start`,
        before lk-eval's own imports) with ``env``; what it said meanwhile waits in its pipe."""
        try:
            server = cls(started.proc, started.log, env, started.channel)
        except BaseException:
            started.kill()
            raise
        server._started = started.started
        return server

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Wait until the server has preloaded; raise :class:`ForkServerError` (the server
        closed) when it cannot start agents. Interrupted meanwhile (a signal raising in this
        thread), the server is killed before the exception goes on: it goes now, not seconds
        after lk-eval has exited."""
        try:
            ready = self._ready.wait(timeout)
        except BaseException:
            self.kill()
            raise
        if not ready:
            self.close()
            raise ForkServerError(f"the fork server was not ready within {timeout:g}s")
        if self.unsupported or self.dead_reason:
            reason = self.unsupported or self.dead_reason or ""
            self.close()
            raise ForkServerError(reason)
        self.ready_seconds = time.monotonic() - self._started

    def kill(self) -> None:
        """Stop the server at once (SIGKILL to its process group), whatever it is doing: for
        a run that stops before it needs agents, or is interrupted. Idempotent."""
        with self._lock:
            self.dead_reason = self.dead_reason or "the fork server was stopped"
        _discard(self._proc, self._fd_channel, self._stderr)
        self._reader.join(5)

    @property
    def preloading(self) -> bool:
        """True until the server has preloaded or closed (:meth:`wait_ready` would wait)."""
        return not self._ready.is_set()

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def mode(self) -> Literal["warm"]:
        return "warm"

    @property
    def alive(self) -> bool:
        """True while the server accepts spawns."""
        return self.dead_reason is None and self._proc.poll() is None

    def describe(self) -> str:
        """One line for the run's output: what was preloaded and how long it took."""
        plugins = ", ".join(p.rsplit(".", 1)[-1] for p in self.info.get("plugins", []))
        return (
            f"warm starts: fork server ready in {self.ready_seconds:.1f}s "
            f"(livekit-agents {self.info.get('livekit_agents', '?')}, "
            f"python {self.info.get('python', '?')}, plugins: {plugins or 'none'})"
        )

    async def spawn(self, request: SpawnRequest, timeout: float = 30.0) -> ForkedProcess:
        """Fork one agent host; its stdout and stderr go to the request's log (appended).

        Raises :class:`ForkServerError` when the server is gone or refuses; the caller then
        starts the agent cold.
        """
        env = request.env
        differs = [k for k in STARTUP_ONLY_ENV if env.get(k) != self._startup_env[k]]
        if differs:
            raise ForkServerError(
                f"the agent's {', '.join(differs)} differ from the fork "
                "server's, and only take effect when an interpreter starts"
            )
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[ForkedProcess] = loop.create_future()
        spawn_id = f"s{next(self._ids)}"
        command = {
            "cmd": "spawn",
            "id": spawn_id,
            "argv": list(request.host_args),
            "env": dict(env),
            "log": str(request.log_path),
            "cwd": str(request.cwd),
            "control_fd": request.control_fd,
        }
        with self._lock:
            if self.dead_reason is not None:
                raise ForkServerError(self.dead_reason)
            self._pending[spawn_id] = (loop, fut)
        try:
            self._send(command, fd=(spawn_id, request.control_fd))
            # no shield: a timeout or cancellation cancels ``fut``, and a child reported
            # after that is killed (see _deliver_child)
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            raise ForkServerError(f"the fork server did not answer within {timeout:g}s") from None
        finally:
            with self._lock:
                self._pending.pop(spawn_id, None)

    def _send(self, command: Mapping[str, Any], fd: tuple[str, int] | None = None) -> None:
        """Write one command; ``fd`` (spawn id, descriptor) goes first, over the fd channel."""
        data = (json.dumps(command) + "\n").encode()
        stdin = self._proc.stdin
        assert stdin is not None
        try:
            with self._write_lock:
                if fd is not None:
                    socket.send_fds(self._fd_channel, [fd[0].encode()], [fd[1]])
                stdin.write(data)
                stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as exc:
            raise ForkServerError(f"the fork server is gone ({exc})") from None

    def _read_loop(self) -> None:
        stdout = self._proc.stdout
        assert stdout is not None
        for raw in stdout:
            try:
                msg = json.loads(raw)
            except ValueError:
                continue  # not ours: the server writes nothing else to stdout
            self._on_message(msg)
        self._on_eof()

    def _on_message(self, msg: dict[str, Any]) -> None:
        event = msg.get("event")
        if event == "ready":
            self.info = msg
            self._ready.set()
        elif event == "unsupported":
            self.unsupported = str(msg.get("reason", "unsupported"))
            self._ready.set()
        elif event == "spawned":
            child = ForkedProcess(int(msg["pid"]))
            with self._lock:
                waiter = self._pending.pop(str(msg.get("id")), None)
                if waiter is not None:
                    self._children[child.pid] = child
            if waiter is None or not _hand_over(waiter, _deliver_child, child):
                _kill_group(child.pid)  # nobody waits for it any more
        elif event == "spawn_failed":
            with self._lock:
                waiter = self._pending.pop(str(msg.get("id")), None)
            if waiter is not None:
                _hand_over(waiter, _fail, ForkServerError(str(msg.get("error"))))
        elif event == "exited":
            with self._lock:
                found = self._children.pop(int(msg["pid"]), None)
            if found is not None:
                found._exited(int(msg["returncode"]))

    def _on_eof(self) -> None:
        """The server is gone: its children died with it (PR_SET_PDEATHSIG)."""
        try:
            rc = self._proc.wait(timeout=5)
            how = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"code {rc}"
        except (subprocess.TimeoutExpired, ValueError):
            how = "an unknown status"
        reason = f"the fork server exited with {how}"
        with self._lock:
            self.dead_reason = self.dead_reason or reason
            pending, self._pending = list(self._pending.values()), {}
            children, self._children = list(self._children.values()), {}
        for waiter in pending:
            _hand_over(waiter, _fail, ForkServerError(reason))
        for child in children:
            _kill_group(child.pid)  # already dead on Linux; elsewhere make it so
            child._exited(-signal.SIGKILL)
        self._ready.set()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the server; children still running are killed with it. Idempotent."""
        with self._lock:
            self.dead_reason = self.dead_reason or "the fork server was closed"
        with contextlib.suppress(ForkServerError):
            self._send({"cmd": "shutdown"})
        with contextlib.suppress(OSError, ValueError):
            if self._proc.stdin is not None:
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._reader.join(timeout)
        self._fd_channel.close()
        if self._stderr is not None:
            self._stderr.close()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _hand_over(
    waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]],
    how: Any,
    value: Any,
) -> bool:
    """Complete a future from the reader thread; False when its loop is closed."""
    loop, fut = waiter
    try:
        loop.call_soon_threadsafe(how, fut, value)
        return True
    except RuntimeError:
        return False


def _discard(proc: subprocess.Popen[bytes], *resources: Any) -> None:
    """Kill a server's process group, reap it, and close what lk-eval holds of it."""
    _kill_group(proc.pid)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)
    for resource in (*resources, proc.stdin):
        with contextlib.suppress(OSError):
            if resource is not None:
                resource.close()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
