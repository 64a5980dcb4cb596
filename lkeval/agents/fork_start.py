"""The fork server's process, started with the standard library alone.

``lkeval run`` starts the fork server in its first lines, before lk-eval's own imports
(:mod:`lkeval.run.early_start`): the server's preload (the framework's import, ~2.9 s of its
own CPU) is the longest thing a run waits for, and everything lk-eval imports and checks
meanwhile happens on the other core. So starting the process needs nothing the client
(:mod:`lkeval.agents.fork_client`, which brings asyncio and the protocol in) needs: this
module opens the server's log, its fd channel and the process, and
:meth:`~lkeval.agents.fork_client.ForkServer.adopt` wraps them into the client later. The
server's stdout is a pipe: what it says meanwhile (its ``ready``) waits there for the client.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from lkeval import host
from lkeval.agents.interface import LaunchError
from lkeval.agents.plugins import agent_plugins

SERVER_SCRIPT = Path(host.__file__).resolve().with_name("fork_server.py")

#: Processes of the run's launchers (a fork server): lk-eval's children, but not orphans
#: (:func:`lkeval.agents.orphans.kill_all_now` sweeps the others).
LAUNCHER_PIDS: set[int] = set()


class ForkServerError(LaunchError):
    """The fork server cannot start this agent (unsupported, died, or refused the spawn)."""


@dataclass
class ServerProcess:
    """A fork server's process as started: not yet known to be ready, nothing read from it."""

    proc: subprocess.Popen[bytes]
    channel: socket.socket
    """lk-eval's end of the fd channel (agents' control channels travel over it)."""
    log: IO[bytes] | None
    started: float = field(default_factory=time.monotonic)

    def kill(self) -> None:
        """Kill its process group, reap it, and close what lk-eval holds of it."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        for resource in (self.channel, self.log, self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if resource is not None:
                    resource.close()


def start_server_process(
    python: str,
    env: Mapping[str, str],
    *,
    cwd: Path | None = None,
    agent: Path | None = None,
    log_path: Path | None = None,
    log_is_raw: bool = False,
    script: Path = SERVER_SCRIPT,
) -> ServerProcess:
    """Start ``python script`` as the fork server, in its own session; do not wait for it.

    ``agent`` is only read (never imported) for the ``livekit.plugins`` it uses, which the
    server preloads. Raises :class:`ForkServerError` when the interpreter cannot be started.
    """
    plugins = agent_plugins(agent)
    log: IO[bytes] | None = None
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = log_path.open("wb")
    ours, theirs = socket.socketpair()  # control channels travel to the server over it
    argv = [python, str(script), "--fd-channel", str(theirs.fileno())]
    if log_path is not None and log_is_raw:  # unmasked: deleted if lk-eval dies first
        argv += ["--raw-log", str(log_path)]
    for plugin in plugins:
        argv += ["--preload", plugin]
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=dict(env),
            cwd=str(cwd) if cwd else None,
            start_new_session=True,
            pass_fds=(theirs.fileno(),),
        )
    except OSError as exc:
        if log is not None:
            log.close()
        ours.close()
        raise ForkServerError(f"could not start {python}: {exc}") from None
    finally:
        theirs.close()
    LAUNCHER_PIDS.add(proc.pid)  # not an orphan to sweep
    return ServerProcess(proc, ours, log, started)


__all__ = [
    "LAUNCHER_PIDS",
    "SERVER_SCRIPT",
    "ForkServerError",
    "ServerProcess",
    "start_server_process",
]
