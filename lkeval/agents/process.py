"""One agent process per scenario: prepare it, let it talk when its slot opens, stop it.

The facts this module is built on (docs/protocol.md): the console dials us; an entrypoint that
raises leaves the process alive and never connected, with ``"reason": "job crashed"`` in its
log; an import error exits with rc 1; closing the socket does not stop the agent, SIGTERM does
(in its own process group, SIGKILL after a grace period). So each phase races the process
exit, the crash line in the log, and a timeout.

Two phases, so that load cannot change a transcript (issue 10 item 7): :meth:`prepare` starts
the agent host (through the run's launcher: forked or cold, see :mod:`lkeval.agents.interface`),
sends it the scenario and waits until it has imported the agent, started its server and run its
entrypoint up to ``AgentSession.start``, but not its session; then :meth:`connect` says go and
waits for the console to dial in. Between the two the agent waits for a conversation slot with
no session, greeting or idle timer running.

Each agent gets its own directory as working directory (the console's room is always
``console``, so per-room files would collide between parallel scenarios): links to the
project directory's entries, so relative reads still work, plus its own TMPDIR. What the agent
writes there is kept next to its log; the links and the temp dir are removed when it stops.
Stopping kills the agent's whole tree, including descendants that called ``setsid``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lkeval import defaults
from lkeval.agents.cold import ColdLauncher
from lkeval.agents.environment import LOOP_MONITOR_ENV as LOOP_MONITOR_ENV
from lkeval.agents.environment import LOOP_MONITOR_WARN_MS as LOOP_MONITOR_WARN_MS
from lkeval.agents.environment import agent_environment
from lkeval.agents.failure import BOOT_FAILURE as BOOT_FAILURE
from lkeval.agents.failure import CRASH_MARKERS as CRASH_MARKERS
from lkeval.agents.failure import MOCK_TOOLS_REASON as MOCK_TOOLS_REASON
from lkeval.agents.failure import crash_reason, exit_reason, log_crashed
from lkeval.agents.interface import AgentProc, Launcher, LaunchError, SpawnRequest, StartMode
from lkeval.agents.limits import (
    DEFAULT_AGENT_LOG_MIB,
    DEFAULT_AGENT_MEMORY_MIB,
    ResidentMemory,
    bound_passed,
)
from lkeval.agents.logs import LOG_LIMIT_BYTES
from lkeval.agents.logs import publish_log as publish_log
from lkeval.agents.logs import publish_pending_logs as publish_pending_logs
from lkeval.agents.logs import read_log_tail as read_log_tail
from lkeval.agents.machine import with_load
from lkeval.agents.memory import oom_kills
from lkeval.agents.protocol import SessionConnection, SessionListener
from lkeval.agents.workdir import prepare_agent_dir
from lkeval.host import agent_host, control, tree

# Every agent process still running, so an interrupted lk-eval can stop them all.
LIVE_PROCESSES: set[AgentProcess] = set()


class AgentFailure(Exception):
    """The agent did not boot or died; ``reason`` is one line, ``log_tail`` its last lines."""

    def __init__(self, reason: str, log_tail: tuple[str, ...] = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        self.log_tail = log_tail


@dataclass(frozen=True)
class AgentLaunch:
    """How to start the agent under test.

    ``launcher`` starts the agent hosts (a fork server for warm starts); without one they
    start cold. ``cwd`` is the project directory each agent's own directory mirrors
    (default: lk-eval's working directory).
    """

    agent: Path
    python: str = sys.executable
    cwd: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    launcher: Launcher | None = field(default=None, compare=False, repr=False)
    #: Where the agent writes its raw log (the run's private work dir); None: in place.
    raw_log_dir: Path | None = field(default=None, compare=False, repr=False)
    #: Most memory (resident MiB) one agent process may use before it is stopped; 0: no bound.
    memory_limit_mib: int = DEFAULT_AGENT_MEMORY_MIB
    #: Most log one agent may write before it is stopped (the published copy is cut there).
    log_limit_mib: int = DEFAULT_AGENT_LOG_MIB
    #: ``--inference-class``: "low" (as LiveKit's text simulation pins it) or "agent".
    inference_class: str = defaults.INFERENCE_CLASS


def agent_env(launch: AgentLaunch) -> dict[str, str]:
    """The agent's environment (cold or warm): :func:`~lkeval.agents.environment.agent_environment`
    with the run's ``--env`` and inference class."""
    return agent_environment(launch.env, launch.inference_class)


def _conditions(received: bytes) -> dict[str, Any]:
    """What the host announced before ``prepared`` (``agent_host.conditions_line``)."""
    for line in received.splitlines():
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            said = json.loads(line)
            if isinstance(said, dict) and "inference_class" in said:
                return said
    return {}


class AgentProcess:
    """The agent process of one scenario, from spawn to a connected session to exit.

    ``dispatch`` is the scenario as LiveKit's ``SimulationDispatch`` JSON (or a file holding
    it); the agent receives it right after the spawn, its session starts with ``go``.
    """

    def __init__(
        self,
        launch: AgentLaunch,
        dispatch: str | Path,
        log_path: Path,
        mock_tools: Mapping[str, Any] | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        self.launch = launch
        # This agent's own additions to the run's environment (its scenario's tape).
        self.extra_env = dict(extra_env or {})
        self.dispatch = dispatch
        self.mock_tools = dict(mock_tools or {})
        self.log_path = log_path
        # The agent writes its raw output into the run's private work dir; only the filtered
        # copy reaches ``log_path`` when it stops (see :func:`publish_log`).
        raw_dir = launch.raw_log_dir
        self.raw_log_path = raw_dir / log_path.name if raw_dir is not None else log_path
        self.agent_dir = log_path.with_name(log_path.stem + ".files")
        self.proc: AgentProc | None = None
        self.boot_seconds: float | None = None
        self.started: StartMode | None = None
        self._listener: SessionListener | None = None
        self._control: socket.socket | None = None
        self._went = False  # told to start its session
        self._after_go = b""  # what the host said on the control channel since go
        self._ending = False  # the agent said it is ending its session
        # The LiveKit Inference class the agent's calls run at, as its host said when prepared:
        # "low" (pinned, as LiveKit's text simulation does) or "agent" (as each model asks).
        self.inference_class = ""
        # Whether its session marks the end of its greeting (``host/greeting_mark.py``).
        self.marks_greeting = False
        # Which speed patches its host applied and why (``host/pins.py``): name -> "on (...)".
        self.speed_patches: dict[str, str] = {}
        self._log_offset = 0
        self._log_size = -1  # the raw log's size at its last read
        self._crash: str | None = None  # the crash its log reported (once seen, it stays)
        self._exited: asyncio.Future[int] | None = None  # see _exit_waiter
        self._memory: ResidentMemory | None = None  # its /proc file, open while it is watched
        self._stopped_for: str | None = None  # a memory or log bound it passed
        self._oom_kills: int | None = None  # the kernel's count of OOM kills at its spawn

    @property
    def pid(self) -> int | None:
        """The agent host's pid once spawned."""
        return self.proc.pid if self.proc is not None else None

    @property
    def prepared(self) -> bool:
        """Whether it has imported its code and run its entrypoint up to its session."""
        return self.boot_seconds is not None

    @property
    def start_mode(self) -> str | None:
        """``warm`` or ``cold`` once spawned (:attr:`started` also says why cold)."""
        return self.started.mode if self.started else None

    async def start(
        self, boot_timeout: float, before_session: Callable[[], Awaitable[None]] | None = None
    ) -> SessionConnection:
        """Prepare the agent, await ``before_session`` (its conversation slot), connect.

        Raises :class:`AgentFailure` when the process exits, its job crashes, or a phase
        takes longer than ``boot_timeout`` seconds (the wait in between is not counted).
        """
        await self.prepare(boot_timeout)
        if before_session is not None:
            await before_session()
        return await self.connect(boot_timeout)

    async def prepare(self, boot_timeout: float) -> None:
        """Spawn the agent and wait until it is ready to start its session."""
        started = time.monotonic()
        self._listener = SessionListener()
        addr = await self._listener.start()
        parent, child = socket.socketpair()
        self._control = parent
        parent.setblocking(False)
        self._oom_kills = oom_kills()
        try:
            self.proc = await self._spawn(addr, child.fileno())
        finally:
            child.close()  # the agent holds its own copy now
        LIVE_PROCESSES.add(self)
        await self._race("prepare", self._read_prepared(), boot_timeout)
        self.boot_seconds = time.monotonic() - started

    async def connect(self, boot_timeout: float) -> SessionConnection:
        """Say go and return the connection once the console dials in."""
        assert self._listener is not None and self._control is not None, "prepare() first"
        started = time.monotonic()
        self._went = True
        with contextlib.suppress(OSError):  # the agent is gone: the race reports how it ended
            await asyncio.get_running_loop().sock_sendall(self._control, control.GO)
        try:
            conn = await self._race("connect", self._listener.accepted, boot_timeout)
        finally:
            self._listener.stop()
        self.boot_seconds = (self.boot_seconds or 0.0) + time.monotonic() - started
        return conn

    def _scenario_line(self) -> bytes:
        """The scenario for the host's job (its dispatch and mocks), sent right after spawn:
        the job runs up to its session's start before ``prepared``."""
        dispatch = self.dispatch
        if isinstance(dispatch, Path):
            dispatch = dispatch.read_text(encoding="utf-8")
        message: dict[str, Any] = {"dispatch": dispatch}
        if self.mock_tools:
            message["mock_tools"] = self.mock_tools
        return (json.dumps(message) + "\n").encode()

    def ending_announced(self) -> bool:
        """Whether the agent has said it is ending its session (``{"ending": true}`` on the
        control channel, written before anything it sends after ``ctx.shutdown()``): read
        without waiting, so what is already there when a turn's answer arrives counts."""
        if not self._ending and self._control is not None and self._went:
            with contextlib.suppress(BlockingIOError, InterruptedError, OSError):
                while chunk := self._control.recv(4096):
                    self._after_go += chunk
                    if control.ENDING.strip() in self._after_go:
                        self._ending = True
                        break
        return self._ending

    async def _spawn(self, addr: str, control_fd: int) -> AgentProc:
        """Start the host through the run's launcher; fall back to a cold start."""
        request = SpawnRequest(
            agent=self.launch.agent,
            host_args=(
                str(self.launch.agent),
                "--connect-addr",
                addr,
                "--control-fd",
                str(control_fd),
            ),
            env=self._env(),
            cwd=self.agent_dir,
            log_path=self.raw_log_path,
            control_fd=control_fd,
        )
        self.raw_log_path.parent.mkdir(parents=True, exist_ok=True)
        self.raw_log_path.write_bytes(b"")
        prepare_agent_dir(self.agent_dir, self.launch.cwd or Path.cwd())
        launcher = self.launch.launcher or ColdLauncher(self.launch.python)
        try:
            proc = await launcher.spawn(request)
            self.started = StartMode(launcher.mode, getattr(launcher, "why", ""))
            return proc
        except LaunchError as exc:
            if launcher.mode == "cold":
                raise AgentFailure(str(exc)) from None
            why = f"warm start failed: {exc}"
        with self.raw_log_path.open("ab") as log:
            log.write(f"lk-eval: {why}; starting cold\n".encode())
        self.started = StartMode("cold", why)
        try:
            return await ColdLauncher(self.launch.python).spawn(request)
        except LaunchError as exc:
            raise AgentFailure(str(exc)) from None

    def _env(self) -> dict[str, str]:
        env = {
            **agent_env(self.launch),
            **self.extra_env,
            tree.AGENT_DIR_ENV: str(self.agent_dir.resolve()),
            "TMPDIR": str((self.agent_dir / tree.AGENT_TMP).resolve()),
        }
        if self.raw_log_path != self.log_path:  # a private raw log, published when it stops
            env[tree.RAW_LOG_ENV] = str(self.raw_log_path.resolve())
        if self.launch.memory_limit_mib:
            env[tree.MEMORY_ENV] = str(self.launch.memory_limit_mib)
        return env

    async def _read_prepared(self) -> None:
        assert self._control is not None
        loop = asyncio.get_running_loop()
        with contextlib.suppress(OSError):  # the agent is gone: the race reports how it ended
            await loop.sock_sendall(self._control, self._scenario_line())
        received = b""
        while control.PREPARED not in received:
            try:
                chunk = await loop.sock_recv(self._control, 4096)
            except OSError:  # ECONNRESET: it died before reading the scenario line
                chunk = b""
            if not chunk:  # the host closed it: it is exiting; the race reports how
                await asyncio.Event().wait()
            received += chunk
        said = _conditions(received)
        inference_class = said.get("inference_class")
        known = inference_class in agent_host.INFERENCE_CLASSES
        self.inference_class = str(inference_class) if known else ""
        self.marks_greeting = said.get("greeting_mark") is True
        patches = said.get("speed_patches")
        if isinstance(patches, dict):
            self.speed_patches = {str(k): str(v) for k, v in patches.items()}

    async def _race(self, phase: str, work: Awaitable[Any], timeout: float) -> Any:
        """``work``'s result, unless the process dies or ``timeout`` passes first."""
        task = asyncio.ensure_future(work)
        died = asyncio.ensure_future(self.wait_failure())
        try:
            done, _ = await asyncio.wait(
                {task, died}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            died.cancel()
            if not task.done():
                task.cancel()
        if task in done:
            broken = _broken_channel(task)
            if broken is None:
                return task.result()
            # its channel to the agent broke (a reset while its boot failed): the agent's end
            # says why, or the break itself does; an error of this scenario, never of lk-eval
            reason = await self._end_after(broken)
            raise AgentFailure(f"agent failed to boot: {reason}", self.log_tail())
        if died in done:
            reason = died.result()
            if not reason.startswith(MOCK_TOOLS_REASON):
                reason = f"{BOOT_FAILURE} {reason}"
            raise AgentFailure(reason, self.log_tail())
        what = "connect"
        if phase == "prepare":
            what = (  # an entrypoint that hangs, or never starts a session, ends here
                "prepare (import the agent, start its server, run its entrypoint up to "
                "AgentSession.start)"
            )
        raise AgentFailure(
            with_load(f"agent did not {what} within {timeout:g}s (boot timeout)"), self.log_tail()
        )

    async def _end_after(self, broken: OSError, grace: float = defaults.STOP_GRACE) -> str:
        """Why the agent ended, once the channel to it broke with ``broken``: its exit (or
        crash) within ``grace`` seconds, else the break itself."""
        with contextlib.suppress(asyncio.TimeoutError):
            return await asyncio.wait_for(self.wait_failure(), grace)
        return f"its connection to lk-eval broke ({type(broken).__name__}: {broken})"

    async def wait_failure(self, poll: float = 0.1) -> str:
        """Resolve with a reason once the process exits or its log says the job crashed.

        Every request of a conversation races this, so it runs for every live conversation
        all the time and must cost next to nothing: one exit waiter per process (shared by
        every call, woken by the exit itself), and between waits one ``stat`` of the log (read
        only when it has grown) and one read of the process's memory through an open file.
        """
        assert self.proc is not None
        exited = self._exit_waiter()
        while True:
            if self.proc.returncode is not None:
                return self.exit_reason()
            crash = self._check()
            if crash:
                return crash
            await asyncio.wait((exited,), timeout=poll)

    def _exit_waiter(self) -> asyncio.Future[int]:
        """The one task of this loop that waits for the process to exit."""
        assert self.proc is not None
        loop = asyncio.get_running_loop()
        waiter = self._exited
        if waiter is None or waiter.get_loop() is not loop or waiter.cancelled():
            waiter = self._exited = loop.create_task(self.proc.wait())
        return waiter

    def _check(self) -> str | None:
        """One look between waits: the log's crash line, then the memory and log bounds."""
        try:
            size: int | None = os.stat(self.raw_log_path).st_size
        except OSError:
            size = None
        if self._crash is None and size is not None and size != self._log_size:
            self._log_size = size  # read the log only when it has grown
            self._crash = self._scan_log_for_crash()
        return self._crash or self._over_bounds(size)

    def _over_bounds(self, log_size: int | None) -> str | None:
        """Why the agent was stopped for its memory or its log, once it passes a bound (then
        its whole tree is killed: a runaway agent must not take the runner down)."""
        if self._stopped_for is None and self.proc is not None:
            if self._memory is None:
                self._memory = ResidentMemory(self.proc.pid)
            self._stopped_for = bound_passed(
                self._memory,
                log_size,
                self.launch.memory_limit_mib,
                self.launch.log_limit_mib,
            )
            if self._stopped_for is not None:
                descendants = tree.process_tree(self.proc.pid)
                _signal_group(self.proc.pid, signal.SIGKILL)
                tree.kill_processes(descendants)
        return self._stopped_for

    def exit_reason(self) -> str:
        """Describe how the process ended, with the exception line of its log if any."""
        assert self.proc is not None and self.proc.returncode is not None
        if self._stopped_for is not None:
            return self._stopped_for
        return exit_reason(
            self.proc.returncode, self.log_tail(200), self.launch.python, self._oom_killed
        )

    def _oom_killed(self) -> bool:
        """Whether the kernel's OOM killer struck while this agent lived (its SIGKILL that
        lk-eval did not send is then most likely that)."""
        now = oom_kills()
        return self._oom_kills is not None and now is not None and now > self._oom_kills

    def _scan_log_for_crash(self) -> str | None:
        crashed, self._log_offset = log_crashed(self.raw_log_path, self._log_offset)
        return crash_reason(self.log_tail(200), self.launch.python) if crashed else None

    def log_tail(self, lines: int = 30) -> tuple[str, ...]:
        """The last lines of this agent's log."""
        return read_log_tail(self.raw_log_path, lines)

    async def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the agent's group, SIGKILL it after ``grace`` seconds, then kill whatever
        is left of its tree (descendants that left the group with ``setsid``).

        Finishes even when the caller is cancelled meanwhile (``asyncio.run`` cancels every
        task when it ends, and an attempt can be cancelled twice): a stop cut short would
        leave the agent running. The cancellation is raised once the agent is stopped.
        """
        stopping = asyncio.ensure_future(self._stop(grace))
        cancelled = False
        while not stopping.done():
            try:
                await asyncio.shield(stopping)
            except asyncio.CancelledError:
                if stopping.cancelled():  # cancelled itself: its cleanup has run
                    break
                cancelled = True
        if cancelled or stopping.cancelled():
            raise asyncio.CancelledError
        stopping.result()

    async def _stop(self, grace: float) -> None:
        if self._listener is not None:
            self._listener.stop()
        proc = self.proc
        try:
            if proc is not None and proc.returncode is None:
                descendants = tree.process_tree(proc.pid)
                # No session yet (its entrypoint crashed or hangs, or it waited for a slot that
                # never came): nothing to end gracefully, so it is killed at once, and by us:
                # closing the control channel would make the host delete its raw log as if
                # lk-eval were gone, and the log of a crashed entrypoint would go unpublished.
                _signal_group(proc.pid, signal.SIGTERM if self._went else signal.SIGKILL)
                try:
                    await asyncio.wait_for(proc.wait(), grace)
                except asyncio.TimeoutError:
                    descendants += tree.process_tree(proc.pid)
                    _signal_group(proc.pid, signal.SIGKILL)
                    await proc.wait()
                tree.kill_processes(descendants)
            if proc is not None:
                _signal_group(proc.pid, signal.SIGKILL)  # what it left behind in its group
        finally:
            self._release()
            await asyncio.to_thread(
                publish_log,
                self.raw_log_path,
                self.log_path,
                self.launch.log_limit_mib * 1024 * 1024 or LOG_LIMIT_BYTES,
            )

    def _release(self) -> None:
        """Close the control channel (a host still alive then kills itself) and clean up."""
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._memory is not None:
            self._memory.close()
        tree.clean_agent_dir(str(self.agent_dir))
        LIVE_PROCESSES.discard(self)

    def kill_now(self) -> None:
        """SIGKILL the agent's whole tree at once (no grace), from any thread or none."""
        if self.proc is not None and self.proc.returncode is None:
            descendants = tree.process_tree(self.proc.pid)
            _signal_group(self.proc.pid, signal.SIGKILL)
            tree.kill_processes(descendants)
        self._release()


def _broken_channel(task: asyncio.Future[Any]) -> OSError | None:
    """The OS error a finished phase raised (a connection to the agent reset or refused), or
    None: that phase succeeded, or failed some other way (raised as it is)."""
    if task.cancelled():
        return None
    exc = task.exception()
    return exc if isinstance(exc, OSError) and not isinstance(exc, TimeoutError) else None


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
