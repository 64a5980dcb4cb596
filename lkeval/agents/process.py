"""One agent process per scenario: spawn through the console code path, watch it boot, stop it.

The facts this module is built on (DESIGN.md §3): the console dials us; an entrypoint that
raises leaves the process alive and never connected, with ``"reason": "job crashed"`` in its
log; an import error exits with rc 1; closing the socket does not stop the agent, SIGTERM does
(in its own process group, SIGKILL after a grace period). So boot races four things: the
connection, the process exit, the crash line in the log, and a timeout.

Two ways to start, told apart only here: cold (a fresh interpreter per scenario) or warm (forked
by the run's fork server, ``AgentLaunch.launcher``; see :mod:`lkeval.agents.fork_client`). Both run the
same host code with the same environment and log file, and end the same way: the agent is its
own process group either way, so crash detection and SIGTERM/SIGKILL shutdown do not change.
When the fork server is gone, a warm start falls back to a cold one for that scenario.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from lkeval.agents import agent_host
from lkeval.agents.protocol import SessionConnection, SessionListener
from lkeval.agents.fork_client import ForkServer, ForkServerError

CRASH_MARKERS = ('"reason": "job crashed"', "reason=job crashed", "job crashed")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
HOST_SCRIPT = Path(agent_host.__file__).resolve()

# Every agent process still running, so an interrupted lk-eval can stop them all.
LIVE_PROCESSES: set[AgentProcess] = set()


class AgentFailure(Exception):
    """The agent did not boot or died; ``reason`` is one line, ``log_tail`` its last lines."""

    def __init__(self, reason: str, log_tail: tuple[str, ...] = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        self.log_tail = log_tail


class AgentProc(Protocol):
    """What lk-eval uses of a running agent: ``asyncio.subprocess.Process`` (cold) or
    :class:`~lkeval.agents.fork_client.ForkedProcess` (warm)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...


@dataclass(frozen=True)
class AgentLaunch:
    """How to start the agent under test; with a ``launcher``, agents are forked from it."""

    agent: Path
    python: str = sys.executable
    cwd: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    launcher: ForkServer | None = field(default=None, compare=False, repr=False)


# lk-eval's own credentials, which the agent under test has no use for: the CI token (it can
# write to the repository), the Actions runtime tokens, and the caller's and judge's keys.
# ``--env`` can still hand any of them to the agent explicitly.
WITHHELD_FROM_AGENT = (
    "GITHUB_TOKEN",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "LKEVAL_CALLER_API_KEY",
    "LKEVAL_JUDGE_API_KEY",
)


def agent_env(launch: AgentLaunch) -> dict[str, str]:
    """The agent's environment (cold or warm): ours without lk-eval's own credentials and
    Action inputs, plus the run's additions, with unbuffered output."""
    inherited = {
        k: v
        for k, v in os.environ.items()
        if k not in WITHHELD_FROM_AGENT and not k.startswith("INPUT_")
    }
    return {**inherited, **launch.env, "PYTHONUNBUFFERED": "1"}


def read_log_tail(path: Path, lines: int = 30) -> tuple[str, ...]:
    """The last lines of an agent log, without ANSI colours."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ()
    cleaned = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    return tuple(line for line in cleaned if line)[-lines:]


class AgentProcess:
    """The agent process of one scenario, from spawn to a connected session to exit."""

    def __init__(self, launch: AgentLaunch, dispatch_file: Path, log_path: Path) -> None:
        self.launch = launch
        self.dispatch_file = dispatch_file
        self.log_path = log_path
        self.proc: AgentProc | None = None
        self.boot_seconds: float | None = None
        self.start_mode: Literal["cold", "warm"] | None = None
        self._log_offset = 0

    async def start(self, boot_timeout: float) -> SessionConnection:
        """Spawn the agent and return its connection once it dials in.

        Raises :class:`AgentFailure` when the process exits, its job crashes, or it does not
        connect within ``boot_timeout`` seconds.
        """
        listener = SessionListener()
        addr = await listener.start()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        try:
            self.proc = await self._spawn(addr, agent_env(self.launch))
        except BaseException:
            listener.stop()
            raise
        LIVE_PROCESSES.add(self)
        try:
            conn = await self._race_boot(listener, boot_timeout)
        finally:
            listener.stop()
        self.boot_seconds = time.monotonic() - started
        return conn

    async def _spawn(self, addr: str, env: dict[str, str]) -> AgentProc:
        """Fork from the launcher when there is one that works, else start cold."""
        note = ""
        launcher = self.launch.launcher
        if launcher is not None:
            try:
                proc = await launcher.spawn(
                    agent=self.launch.agent, connect_addr=addr, dispatch_file=self.dispatch_file,
                    env=env, cwd=self.launch.cwd, log_path=self.log_path,
                )
                self.start_mode = "warm"
                return proc
            except ForkServerError as exc:
                note = f"lk-eval: warm start failed ({exc}); starting cold\n"
        self.start_mode = "cold"
        # The host module runs by path: the agent's interpreter needs livekit-agents, not lk-eval.
        argv = [
            self.launch.python,
            str(HOST_SCRIPT),
            str(self.launch.agent),
            "--connect-addr",
            addr,
            "--dispatch-file",
            str(self.dispatch_file),
        ]
        with self.log_path.open("wb") as log:
            if note:
                log.write(note.encode())
                log.flush()
            try:
                return await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=log,
                    stderr=asyncio.subprocess.STDOUT,
                    cwd=str(self.launch.cwd) if self.launch.cwd else None,
                    env=env,
                    start_new_session=True,
                )
            except OSError as exc:
                raise AgentFailure(f"could not start {self.launch.python}: {exc}") from None

    async def _race_boot(self, listener: SessionListener, timeout: float) -> SessionConnection:
        accepted = listener.accepted
        died = asyncio.ensure_future(self.wait_failure())
        racers: set[asyncio.Future[Any]] = {accepted, died}
        try:
            done, _ = await asyncio.wait(
                racers, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            died.cancel()
        if accepted in done:
            return accepted.result()
        if died in done:
            raise AgentFailure(f"agent failed to boot: {died.result()}", self.log_tail())
        raise AgentFailure(
            f"agent did not connect within {timeout:g}s (boot timeout)", self.log_tail()
        )

    async def wait_failure(self, poll: float = 0.1) -> str:
        """Resolve with a reason once the process exits or its log says the job crashed."""
        assert self.proc is not None
        while True:
            if self.proc.returncode is not None:
                return self.exit_reason()
            crash = self._scan_log_for_crash()
            if crash:
                return crash
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.proc.wait()), poll)

    def exit_reason(self) -> str:
        """Describe how the process ended."""
        assert self.proc is not None and self.proc.returncode is not None
        rc = self.proc.returncode
        if rc == agent_host.EXIT_UNSUPPORTED:
            for line in reversed(self.log_tail(200)):
                if agent_host.UNSUPPORTED_MARKER in line:
                    return line.removeprefix("lk-eval: ")
        if rc < 0:
            return f"agent process killed by signal {signal.Signals(-rc).name}"
        last_error = self._last_error_line()
        suffix = f": {last_error}" if last_error else ""
        return f"agent process exited with code {rc}{suffix}"

    def _last_error_line(self) -> str:
        for line in reversed(self.log_tail(60)):
            if re.match(r"^\w*(Error|Exception)\b", line) or line.startswith("lk-eval:"):
                return line
        return ""

    def _scan_log_for_crash(self) -> str | None:
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(self._log_offset)
                chunk = fh.read()
        except OSError:
            return None
        # keep a little overlap so a marker split across reads is still found
        self._log_offset += max(0, len(chunk) - 64)
        text = chunk.decode("utf-8", errors="replace")
        if any(marker in text for marker in CRASH_MARKERS):
            return "the agent's job crashed (its entrypoint raised)" + self._crash_detail()
        return None

    def _crash_detail(self) -> str:
        error = self._last_error_line()
        return f": {error}" if error else ""

    def log_tail(self, lines: int = 30) -> tuple[str, ...]:
        """The last lines of this agent's log."""
        return read_log_tail(self.log_path, lines)

    async def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the agent's process group, SIGKILL it after ``grace`` seconds."""
        proc = self.proc
        if proc is None:
            return
        try:
            if proc.returncode is None:
                _signal_group(proc.pid, signal.SIGTERM)
                try:
                    await asyncio.wait_for(proc.wait(), grace)
                except asyncio.TimeoutError:
                    _signal_group(proc.pid, signal.SIGKILL)
                    await proc.wait()
            # children the agent left behind in its group
            _signal_group(proc.pid, signal.SIGKILL)
        finally:
            LIVE_PROCESSES.discard(self)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def kill_all_now() -> None:
    """Last resort on interrupt: SIGKILL every agent process group still alive."""
    for agent in list(LIVE_PROCESSES):
        if agent.proc is not None:
            _signal_group(agent.proc.pid, signal.SIGKILL)
    LIVE_PROCESSES.clear()
