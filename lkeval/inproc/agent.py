"""One attempt's agent in lk-eval's own interpreter, behind the same seam as an agent process.

:class:`InProcessAgent` is a :class:`~lkeval.agents.interface.SessionAgent`: the attempt,
its conversation, checks, judges and the agent's veto are the code ``lkeval run`` runs. What
differs is below the seam:

- the job is LiveKit's fake job (``livekit.agents.testing.fake_job_context`` on the mock room
  the console uses), carrying the scenario's ``SimulationDispatch`` in its attributes and the
  server's ``on_simulation_end``, as LiveKit's simulator hands them;
- the user's entrypoint runs as registered (``AgentServer._entrypoint_fnc``), unchanged, up
  to its ``AgentSession.start``, which is held until the conversation slot opens
  (:mod:`lkeval.inproc.session_start`);
- the session is served by LiveKit's own ``SessionHost`` over a loopback connection to a
  :class:`~lkeval.agents.protocol.SessionListener` in this same process: the requests,
  events, ``finalize_simulation`` (``on_simulation_end``, once) are the console's.

No process isolation: one scenario plays at a time per interpreter, and what the agent does
to its process (globals, threads, ``sys.exit``) is lk-eval's process too (docs/dev.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lkeval.agents.interface import StartMode
from lkeval.agents.logs import publish_log, read_log_tail
from lkeval.agents.process import MOCK_TOOLS_REASON, AgentFailure, AgentLaunch
from lkeval.agents.protocol import SessionConnection, SessionListener
from lkeval.host import agent_host, tool_mocks
from lkeval.inproc import session_start
from lkeval.inproc.hooks import check_hooks
from lkeval.inproc.loader import load_server

Echo = Callable[[Any], None]
"""Called with each session event as it arrives (``lkeval dev`` prints the transcript), and
with a :class:`ConversationBegins` before an attempt's first event."""


@dataclass(frozen=True)
class ConversationBegins:
    """Handed to the echo when an attempt's conversation begins: the session events after it
    are that scenario's (the next scenario's agent may already be starting)."""

    scenario_id: str


START_MODE = StartMode("in-process")  # type: ignore[arg-type]
AUDIO_REFUSED = "audio scenarios are not played in-process (lkeval dev has no audio): lkeval run"


class _Job:
    """The stand-in for the agent process the conversation races: ``returncode`` 0 once the
    agent's session closed by itself, 1 once its entrypoint failed after its session began."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.returncode: int | None = None
        self.reason = ""
        self._ended = asyncio.get_running_loop().create_future()

    def end(self, code: int, reason: str) -> None:
        if self.returncode is None:
            self.returncode, self.reason = code, reason
            self._ended.set_result(code)

    async def wait(self) -> int:
        return int(await asyncio.shield(self._ended))


class InProcessAgent:
    """The agent of one attempt, played in this interpreter; see the module's docstring."""

    def __init__(
        self,
        launch: AgentLaunch,
        dispatch: str | Path,
        log_path: Path,
        mock_tools: Mapping[str, Any] | None = None,
        extra_env: Mapping[str, str] | None = None,
        echo: Echo | None = None,
    ) -> None:
        self.launch = launch
        self.dispatch = dispatch if isinstance(dispatch, str) else dispatch.read_text("utf-8")
        self.log_path = log_path
        raw_dir = launch.raw_log_dir
        self.raw_log_path = raw_dir / log_path.name if raw_dir is not None else log_path
        self.mock_tools = dict(mock_tools or {})
        self.echo = echo
        self.boot_seconds: float | None = None
        self.started: StartMode | None = None
        self.inference_class = ""
        self.marks_greeting = False
        self.speed_patches: dict[str, str] = {}
        self.session: Any = None
        self._proc: _Job | None = None
        self._listener: SessionListener | None = None
        self._task: asyncio.Task[None] | None = None
        self._prepared: asyncio.Future[None] | None = None
        self._go: asyncio.Future[None] | None = None
        self._ending = self._stopping = False
        self._log: logging.Handler | None = None
        self._root_level = logging.WARNING
        self._holds_lock = False
        self._closing: asyncio.Task[None] | None = None

    @property
    def proc(self) -> _Job | None:
        return self._proc

    async def start(
        self, boot_timeout: float, before_session: Callable[[], Awaitable[None]] | None = None
    ) -> SessionConnection:
        """Run the entrypoint up to its session, await ``before_session``, serve the session.

        One scenario plays at a time per interpreter (the patches and the job context are the
        process's): the engine prepares the next agent while one converses, and here that
        waits until the one playing has stopped; the wait is not the boot's time."""
        await _play_lock().acquire()
        self._holds_lock = True
        started = time.monotonic()
        await self._prepare(boot_timeout)
        self.boot_seconds = time.monotonic() - started
        if before_session is not None:
            await before_session()
        started = time.monotonic()
        conn = await self._connect(boot_timeout)
        self.boot_seconds += time.monotonic() - started
        return conn

    async def _prepare(self, boot_timeout: float) -> None:
        if json.loads(self.dispatch).get("mode") in (agent_host.AUDIO_DISPATCH_MODE, 2):
            raise AgentFailure(AUDIO_REFUSED)
        loop = asyncio.get_running_loop()
        self._proc = _Job()
        self._prepared, self._go = loop.create_future(), loop.create_future()
        self._open_log()
        try:
            server = load_server(self.launch.agent)
            check_hooks(server)
        except Exception as exc:
            raise AgentFailure(str(exc)) from None
        self.speed_patches, self.marks_greeting = session_start.install()
        self.inference_class = session_start.inference_class(self.launch.inference_class)
        self.started = START_MODE
        self._listener = SessionListener()
        await self._listener.start()
        session_start.CURRENT.player = self
        self._task = self._run_entrypoint(server)
        await self._until("prepare", self._prepared, boot_timeout)

    def _run_entrypoint(self, server: Any) -> asyncio.Task[None]:
        """The user's entrypoint as a task of its own, in the scenario's fake job."""
        from livekit.agents.ipc.mock_room import create_mock_room
        from livekit.agents.testing import fake_job_context
        from livekit.agents.types import ATTRIBUTE_SIMULATOR_DISPATCH

        with fake_job_context(room=create_mock_room(), job_id=self.log_path.stem) as job:
            job._info.job.attributes[ATTRIBUTE_SIMULATOR_DISPATCH] = self.dispatch
            job._simulation_end_fnc = server._simulation_end_fnc
            job._on_shutdown = self._job_shutdown  # a fake job's does nothing
            # the task copies the context now: the job is its current job context
            return asyncio.get_running_loop().create_task(self._entrypoint(server, job))

    async def _entrypoint(self, server: Any, job: Any) -> None:
        try:
            await server._entrypoint_fnc(job)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            logging.getLogger("lkeval.inproc").exception("the agent's entrypoint raised")
            reason = f"the agent's entrypoint raised {type(exc).__name__}: {exc}"
            if isinstance(exc, tool_mocks.MockToolsError):  # worded as an agent process's
                reason = f"{MOCK_TOOLS_REASON} {exc}"
            if self._prepared is not None and not self._prepared.done():
                self._prepared.set_exception(AgentFailure(reason, self.log_tail()))
            elif self._proc is not None and not self._stopping:
                self._proc.end(1, reason)
            return
        if self._prepared is not None and not self._prepared.done():
            why = "the agent's entrypoint returned without starting an AgentSession"
            self._prepared.set_exception(AgentFailure(why, self.log_tail()))

    async def serve(
        self, session: Any, start: Callable[..., Awaitable[Any]], args: Any, kwargs: Any
    ) -> Any:
        """The entrypoint's ``AgentSession.start``: prepared here, held until go, then the
        session starts (no room) and LiveKit's ``SessionHost`` serves it on the listener."""
        from livekit.agents.voice.remote_session import SessionHost, TcpSessionTransport

        assert self._prepared is not None and self._go is not None and self._listener is not None
        self.session = session
        if self.mock_tools:
            agent = kwargs.get("agent", args[0] if args else None)
            tool_mocks._enter_mocks(session, agent, self.mock_tools)
        host = SessionHost(TcpSessionTransport("127.0.0.1", self._listener.port))
        host.register_session(session)  # events from the first moment of the session on
        session.on("close", self._on_close)
        if not self._prepared.done():
            self._prepared.set_result(None)
        await self._go
        result = await start(session, *args, **kwargs)
        session._session_host = host  # closed with the session, as the console's host is
        await host.start()
        return result

    def _job_shutdown(self, reason: str) -> None:
        """``ctx.shutdown()``: the job ends, and its session with it, as in an agent process
        (the console's job closes its session on shutdown, then the process exits)."""
        if self.session is not None and not self._stopping:
            closing = asyncio.get_running_loop().create_task(self.session.aclose())
            self._closing = closing  # held: a task nobody references may be collected

    def _on_close(self, event: Any) -> None:
        if self._proc is not None and not self._stopping:
            self._proc.end(0, f"its session closed ({getattr(event, 'reason', '')})")

    async def _connect(self, boot_timeout: float) -> SessionConnection:
        assert self._go is not None and self._listener is not None
        self._go.set_result(None)
        try:
            conn = await self._until("connect", self._listener.accepted, boot_timeout)
        finally:
            self._listener.stop()
        if self.echo is not None:
            scenario = json.loads(self.dispatch).get("scenario") or {}
            self.echo(ConversationBegins(str(scenario.get("id", ""))))
            conn.on_event(self.echo)
        return conn

    async def _until(self, phase: str, work: Awaitable[Any], timeout: float) -> Any:
        """``work``, unless the entrypoint fails first or ``timeout`` passes."""
        try:
            return await asyncio.wait_for(work, timeout)
        except asyncio.TimeoutError:
            why = f"the agent did not {phase} within {timeout:g}s (--boot-timeout)"
            raise AgentFailure(why, self.log_tail()) from None

    def announce_ending(self) -> None:
        """The agent called ``ctx.shutdown()``, ``session.shutdown()`` or ``aclose()``."""
        if not self._stopping:
            self._ending = True

    def ending_announced(self) -> bool:
        return self._ending

    async def wait_failure(self, poll: float = 0.1) -> str:
        assert self._proc is not None
        await self._proc.wait()
        return self._proc.reason

    def exit_reason(self) -> str:
        return self._proc.reason if self._proc is not None else ""

    def log_tail(self, lines: int = 30) -> tuple[str, ...]:
        return read_log_tail(self.raw_log_path, lines)

    def _open_log(self) -> None:
        """The agent's log lines (its own loggers and livekit's, from INFO: the root logger is
        at INFO while it plays) into its raw log; published masked when it stops, as an agent
        process's is."""
        self.raw_log_path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(self.raw_log_path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler.setLevel(logging.INFO)
        for name in ("", "livekit"):
            logging.getLogger(name).addHandler(handler)
        root = logging.getLogger()
        self._root_level = root.level
        if root.level > logging.INFO:
            root.setLevel(logging.INFO)
        self._log = handler

    async def stop(self, grace: float = 5.0) -> None:
        """Close the session (its host too) and the entrypoint; publish the log."""
        self._stopping = True
        try:
            if self.session is not None:
                with contextlib.suppress(Exception, asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(self.session.aclose()), grace)
            if self._task is not None and not self._task.done():
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(asyncio.shield(self._task), grace)
        finally:
            if session_start.CURRENT.player is self:
                session_start.CURRENT.player = None
            if self._listener is not None:
                self._listener.stop()
            self._close_log()
            if self._holds_lock:
                self._holds_lock = False
                _play_lock().release()

    def _close_log(self) -> None:
        handler, self._log = self._log, None
        if handler is None:
            return
        for name in ("", "livekit"):
            logging.getLogger(name).removeHandler(handler)
        logging.getLogger().setLevel(self._root_level)
        handler.close()
        if self.raw_log_path != self.log_path:
            limit = self.launch.log_limit_mib * 1024 * 1024
            publish_log(self.raw_log_path, self.log_path, limit or 1 << 30)


_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
    weakref.WeakKeyDictionary()
)


def _play_lock() -> asyncio.Lock:
    """The interpreter's one playing scenario, per event loop (``play_scenario`` runs each in
    a loop of its own)."""
    loop = asyncio.get_running_loop()
    lock = _locks.get(loop)
    if lock is None:
        lock = _locks[loop] = asyncio.Lock()
    return lock


def in_process_agents(echo: Echo | None = None) -> Callable[..., InProcessAgent]:
    """An :class:`~lkeval.agents.interface.AgentFactory` of in-process agents."""

    def make(
        launch: AgentLaunch,
        dispatch: str | Path,
        log_path: Path,
        mock_tools: Mapping[str, Any] | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> InProcessAgent:
        return InProcessAgent(launch, dispatch, log_path, mock_tools, extra_env, echo)

    make.start_line = (  # type: ignore[attr-defined]
        "lk-eval: in-process: the agent runs in this interpreter, one scenario at a time"
    )
    return make
