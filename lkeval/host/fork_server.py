"""Warm starts: a fork server that imports the framework once and forks one agent per scenario.

Run as ``PYTHON lkeval/host/fork_server.py [--preload MODULE ...]`` with the agent's interpreter
and the environment a cold agent would get. Like ``agent_host`` it imports nothing from lk-eval
(``agent_host`` and ``fork_child`` are loaded from this file's directory, by path, under
private names), so an agent venv without lk-eval runs it.

Why: a cold agent spends ~2.5 CPU-s importing livekit-agents, its plugins, av, the native rtc
library and the OpenAI SDK before it dials in. Forked from a parent that holds all of that, a
child dials in after ~0.15 s and shares those pages copy-on-write (docs/warm-starts.md).

The parent keeps the rules learnt from breakages: one thread, no event loop, no logging setup
(children would log each line twice), no rtc runtime (a started ``FfiClient`` kills every
child); the framework only, never the user's module (its import-time code must see each
scenario's environment); ``gc.freeze()`` after preloading (the children's collector would
otherwise write to, and un-share, the inherited objects); and it reaps its own children, since
the runner cannot wait on processes it did not start. Each child sheds what a cold process
would not have and runs ``agent_host.main`` exactly as a cold start does (``fork_child.py``).

Protocol, one JSON object per line. Commands on stdin: ``spawn`` (id, argv: the host's
arguments, env, cwd, log, control_fd) and ``shutdown``. Before each ``spawn`` line the runner
sends the agent's control channel over the ``--fd-channel`` Unix socket (``SCM_RIGHTS``, with
the spawn id as data); the child gets it under the number ``control_fd`` names. Events on
stdout: ``ready`` (or ``unsupported`` with a reason, then exit), ``spawned`` (id, pid),
``spawn_failed`` (id, error), ``exited`` (pid, returncode: minus the signal number as in
``subprocess``, and ``signal``). On shutdown or end of stdin the server kills its children's
trees and exits; it is a child subreaper, so descendants of its children that called ``setsid``
are in its tree.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

if __package__:  # imported as lkeval.host.fork_server (tests, type checks)
    from . import agent_host, fork_child, tls_context, tree
else:  # run by path with the agent's interpreter, which may not have lk-eval: the agent host,
    # by path, brings the host's one loader (siblings.py), which loads the rest under private
    # names, not through sys.path (a user module named ``agent_host`` stays theirs)
    import importlib.util

    _spec = importlib.util.spec_from_file_location(
        "_lkeval_agent_host",
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent_host.py"),
    )
    assert _spec is not None and _spec.loader is not None
    agent_host = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(agent_host)
    fork_child = agent_host.sibling("fork_child")
    tls_context = agent_host.sibling("tls_context")
    tree = agent_host.sibling("tree")
    agent_host.forget_host_dir()  # nothing preloaded may resolve to this directory's modules

PROTOCOL_VERSION = 2

# Imported lazily by a console child (seen by diffing ``sys.modules`` of a cold agent after a
# tool turn against the framework's own imports). The OpenAI SDK's chat resources alone are
# the ~200 ms stall of an agent's first turn. Each is optional: a missing one only costs speed.
LAZY_MODULES = (
    "livekit.agents.cli.cli",
    "livekit.agents.cli.tcp_console",
    "livekit.agents.cli.discover",
    "livekit.agents.__main__",
    "livekit.agents.voice.remote_session",
    "livekit.agents.voice.report",
    "livekit.agents.ipc.proc_pool",
    "livekit.agents.ipc.mock_room",
    "livekit.agents.llm.async_toolset",
    "livekit.protocol.agent_simulation",
    "openai.resources.chat.completions.completions",
    "openai.resources.models",
    "openai.lib.streaming.chat",
    "openai.pagination",
    "jiter",
    "anyio._backends._asyncio",
    "anyio.streams.memory",
    "anyio.streams.stapled",
    "multiprocessing.connection",
    "multiprocessing.forkserver",
    "multiprocessing.resource_tracker",
    "multiprocessing.spawn",
    "unittest.mock",
    "difflib",
    "pprint",
    "runpy",
)


def emit(event: str, **fields: Any) -> None:
    """Write one event line to the runner (stdout is the protocol channel, nothing else)."""
    data = (json.dumps({"event": event, **fields}) + "\n").encode()
    while data:
        data = data[os.write(1, data) :]


def unsupported_reason() -> str | None:
    """Why warm starts cannot work here, or None. Checked before anything is preloaded."""
    if not hasattr(os, "fork"):
        return f"no fork() on {sys.platform}"
    if sys.platform == "darwin":
        return "macOS does not allow fork() after the native libraries the framework loads"
    missing = agent_host.missing_hooks()  # imports livekit.agents: the bulk of the preload
    if missing:
        return (
            f"livekit-agents {agent_host.installed_version()} lacks {', '.join(missing)} "
            f"(supported: {agent_host.SUPPORTED_RANGE})"
        )
    return None


def _try(step: Callable[[], object]) -> bool:
    """Run one optional preload step; a failure only costs speed (the child pays it)."""
    try:
        step()
        return True
    except Exception:
        return False


def _import(name: str) -> bool:
    return _try(lambda: importlib.import_module(name))


def _ssl_context() -> None:
    # livekit's shared http session builds its TLS context (~30 ms parsing the CA bundle) on
    # the child's event loop; the builder is cached per (SSL_CERT_FILE, SSL_CERT_DIR), so a
    # child whose environment names other certificates still builds its own.
    from livekit.agents.utils.http_context import _create_ssl_context

    _create_ssl_context()


def _tls_context() -> None:
    # the OpenAI SDK's HTTPX client builds its own TLS context (~30-50 ms parsing a CA bundle)
    # in each child; built here, it goes to a child's first client whose environment would
    # build the same one (``tls_context.py``).
    if not tls_context.prepare():
        raise RuntimeError("no HTTPX library whose TLS context was verified")


def _platform_facts() -> None:
    # the OpenAI SDK's first request asks for platform facts; the first ``platform.platform()``
    # runs ``uname -p`` in a subprocess. They describe this machine, so they hold in a child.
    from openai._base_client import get_platform

    get_platform()


# One-time work a child would otherwise do on its event loop; each result is cached by the
# library itself, keyed so that a child that needs a different answer computes it again.
WARM_CALLS: tuple[tuple[str, Callable[[], object]], ...] = (
    ("ssl context", _ssl_context),
    ("httpx tls context", _tls_context),
    ("platform facts", _platform_facts),
    ("mock room", lambda: agent_host.warm_mock_room()),
    ("replay recorder", lambda: agent_host.load_tape()),
    ("host modules", lambda: agent_host.load_host_modules()),
)


#: livekit's preload loads the local inference models (the VAD, and the turn detector's
#: end-of-turn weights: ~244 MB resident) unless this is falsy.
LOCAL_INFERENCE_ENV = "LIVEKIT_AGENTS_PRELOAD_LOCAL_INFERENCE"


def _framework_preload() -> bool:
    """livekit's own one-time warm-up (av, the rtc library loaded but not started, the OpenAI
    SDK resources, a first httpx client); older versions lack it. Without the local inference
    models unless the agent's environment asks for them: an agent in text mode never builds
    them (``tests/agents/test_warm_start.py``), and each fork and exit of an image without
    their ~244 MB costs ~20 ms less CPU (``BENCHMARKS.md``). The children never see this
    setting (each gets its scenario's environment)."""
    asked = LOCAL_INFERENCE_ENV in os.environ
    if not asked:
        os.environ[LOCAL_INFERENCE_ENV] = "0"
    try:
        return _import("livekit.agents.ipc._preload")
    finally:
        if not asked:
            os.environ.pop(LOCAL_INFERENCE_ENV, None)


def preload(plugins: list[str]) -> dict[str, Any]:
    """Import what every child needs, then freeze it; returns what was loaded, for ``ready``.

    stdout is the protocol channel: whatever a module prints while it loads goes to stderr.
    """
    started = time.perf_counter()
    channel = os.dup(1)
    os.dup2(2, 1)
    try:
        info = _preload(plugins)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os.dup2(channel, 1)
        os.close(channel)
    info["preload_seconds"] = round(time.perf_counter() - started, 3)
    return info


def _preload(plugins: list[str]) -> dict[str, Any]:
    loaded_plugins = [p for p in plugins if _import(p)]
    framework_preload = _framework_preload()
    if not framework_preload:
        for step in ("av", "openai.resources"):
            _import(step)
    lazy = [m for m in LAZY_MODULES if _import(m)]
    warmed = [name for name, step in WARM_CALLS if _try(step)]
    problem = _fork_hazard()
    gc.collect()
    gc.freeze()
    gc.enable()  # the children collect as a cold agent does
    return {
        "plugins": loaded_plugins,
        "framework_preload": framework_preload,
        "lazy_modules": len(lazy),
        "warmed": warmed,
        "hazard": problem,
    }


def _fork_hazard() -> str | None:
    """A preloaded module that broke a rule of the parent (checked, not assumed)."""
    import logging
    import threading

    ffi = sys.modules.get("livekit.rtc._ffi_client")
    if ffi is not None and getattr(ffi.FfiClient, "_instance", None) is not None:
        return "a preloaded module started the livekit.rtc runtime"
    if threading.active_count() > 1:
        return "a preloaded module started a Python thread"
    if logging.getLogger().handlers:
        return "a preloaded module configured logging"
    return None


class Server:
    """The parent's loop: commands from stdin, exit reports from reaped children."""

    def __init__(self, fd_channel: socket.socket | None = None) -> None:
        self.fd_channel = fd_channel
        self.children: dict[int, str] = {}  # pid -> spawn id
        self.agent_dirs: dict[int, str] = {}  # pid -> the agent's own directory
        self.raw_logs: set[str] = set()  # raw logs of agents forked (lk-eval publishes them)
        self.lost_runner = False
        self._buf = b""
        self._wake_r, wake_w = os.pipe()
        for fd in (self._wake_r, wake_w):
            os.set_blocking(fd, False)
        # SIGCHLD wakes select() through the wakeup fd; the handler itself does nothing.
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(wake_w)
        # Ctrl-C in the runner's terminal is the runner's to handle: it stops each agent
        # gracefully; the server must not die first (its death SIGKILLs every child).
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    def serve(self) -> None:
        """Run until shutdown or end of input, then kill what is left."""
        try:
            while self._step():
                pass
        finally:
            descendants = tree.process_tree(os.getpid())  # children, and what they started
            agent_dirs = list(self.agent_dirs.values())
            for pid in list(self.children):
                _kill_group(pid)
            tree.kill_processes(descendants)
            self._reap()
            # a child killed here may not have finished cleaning up after itself
            for agent_dir in agent_dirs:
                tree.clean_agent_dir(agent_dir)
            if self.lost_runner:  # nobody is left to publish (mask) the raw logs
                for raw_log in self.raw_logs:
                    tree.drop_raw_log(raw_log)

    def _step(self) -> bool:
        readable, _, _ = select.select([0, self._wake_r], [], [])
        with contextlib.suppress(BlockingIOError):
            while self._wake_r in readable and os.read(self._wake_r, 512):
                pass  # drain the wakeup bytes of SIGCHLD
        self._reap()
        if 0 in readable and not self.lost_runner:
            chunk = os.read(0, 65536)
            if not chunk:  # end of input without a shutdown: the runner is gone
                self.lost_runner = True
                return False
            self._buf += chunk
            while b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                if line.strip() and not self._command(line):
                    return False
        return not self.lost_runner

    def _tell(self, event: str, **fields: Any) -> None:
        """:func:`emit`, unless the runner is gone. A broken pipe says it is: then, as at the
        end of its input, nobody is left to publish (mask) the raw logs, so :meth:`serve`
        deletes them. (When a child's exit is reaped before the end of input is read, its
        report is the first thing that finds out.)"""
        if self.lost_runner:
            return
        try:
            emit(event, **fields)
        except BrokenPipeError:
            self.lost_runner = True

    def _command(self, line: bytes) -> bool:
        """Act on one command; False means shut down."""
        try:
            cmd = json.loads(line)
        except ValueError:
            cmd = {"cmd": f"not JSON: {line[:200]!r}"}
        if cmd.get("cmd") == "spawn":
            self._spawn(cmd)
        elif cmd.get("cmd") != "shutdown":
            self._tell("error", error=f"unknown command {cmd.get('cmd')!r}")
        return cmd.get("cmd") != "shutdown"

    def _spawn(self, cmd: dict[str, Any]) -> None:
        spawn_id = str(cmd.get("id"))
        control = self._receive_control(spawn_id)
        try:
            if control is None:
                raise ValueError("no control channel arrived with the spawn")
            env = {str(k): str(v) for k, v in dict(cmd["env"]).items()}
            argv = [str(a) for a in cmd["argv"]]
            target_fd = int(cmd["control_fd"])
            log_fd = os.open(cmd["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except (KeyError, TypeError, ValueError, OSError) as exc:
            if control is not None:
                os.close(control)
            self._tell("spawn_failed", id=spawn_id, error=str(exc))
            return
        sync_r, sync_w = os.pipe()
        server_pid = os.getpid()
        for stream in (sys.stdout, sys.stderr):  # nothing buffered may be written twice
            with contextlib.suppress(Exception):
                stream.flush()
        try:
            # numpy's OpenBLAS keeps a native thread pool; it re-creates it in a child
            # (pthread_atfork), so Python 3.12's warning about forking with threads is noise.
            with warnings.catch_warnings():  # restored in the child too, before it runs
                warnings.filterwarnings(
                    "ignore", "This process .* is multi-threaded", DeprecationWarning
                )
                pid = os.fork()
        except OSError as exc:
            for fd in (log_fd, sync_r, sync_w, control):
                os.close(fd)
            self._tell("spawn_failed", id=spawn_id, error=f"fork failed: {exc}")
            return
        if pid == 0:
            fork_child.child_main(
                agent_host,
                argv,
                env,
                cmd.get("cwd"),
                log_fd,
                sync_w,
                server_pid,
                (control, target_fd),
            )
        os.close(log_fd)
        os.close(sync_w)
        os.close(control)  # only the child holds the agent's end now
        # Wait until the child has its own session and death signal: from then on the runner
        # may killpg() the pid it is about to learn, and the child cannot outlive us.
        while os.read(sync_r, 64):
            pass
        os.close(sync_r)
        self.children[pid] = spawn_id
        if env.get(tree.AGENT_DIR_ENV):
            self.agent_dirs[pid] = env[tree.AGENT_DIR_ENV]
        if env.get(tree.RAW_LOG_ENV):
            self.raw_logs.add(env[tree.RAW_LOG_ENV])
        self._tell("spawned", id=spawn_id, pid=pid)

    def _receive_control(self, spawn_id: str) -> int | None:
        """The control channel the runner sent ahead of this spawn (None when none came)."""
        if self.fd_channel is None:
            return None
        try:
            data, fds, _, _ = socket.recv_fds(self.fd_channel, 256, 4)
        except OSError:
            return None
        if data.decode(errors="replace") != spawn_id or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            return None
        return fds[0]

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.agent_dirs.pop(pid, None)  # the runner cleans up after agents that exited
            if self.children.pop(pid, None) is None:
                continue
            if os.WIFSIGNALED(status):
                sig = os.WTERMSIG(status)
                self._tell("exited", pid=pid, returncode=-sig, signal=signal.Signals(sig).name)
            else:
                code = os.waitstatus_to_exitcode(status)
                self._tell("exited", pid=pid, returncode=code, signal=None)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    """Check support, preload, announce, serve."""
    import argparse

    parser = argparse.ArgumentParser(prog="lkeval/host/fork_server.py")
    parser.add_argument(
        "--preload",
        action="append",
        default=[],
        metavar="MODULE",
        help="also import this module (the plugins the agent uses)",
    )
    parser.add_argument(
        "--raw-log",
        metavar="PATH",
        help="this server's own unpublished log: deleted if the runner dies",
    )
    parser.add_argument(
        "--fd-channel",
        type=int,
        metavar="FD",
        help="Unix socket the agents' control channels arrive on",
    )
    args = parser.parse_args(argv)
    fd_channel = socket.socket(fileno=args.fd_channel) if args.fd_channel is not None else None
    tree.become_subreaper()
    # No collector passes while the framework loads: they walk a heap that only grows (~15%
    # of the preload's CPU); ``_preload`` collects once, freezes, and turns it back on.
    gc.disable()
    reason = unsupported_reason()
    if reason is not None:
        emit("unsupported", reason=reason)
        return 0
    info = preload(args.preload)
    if info["hazard"]:
        emit("unsupported", reason=info.pop("hazard"))
        return 0
    info.pop("hazard")
    server = Server(fd_channel)
    if args.raw_log:
        server.raw_logs.add(args.raw_log)
    emit(
        "ready",
        protocol=PROTOCOL_VERSION,
        pid=os.getpid(),
        livekit_agents=agent_host.installed_version(),
        python=sys.version.split()[0],
        **info,
    )
    server.serve()
    return 0


def leave(code: int) -> None:
    """Exit without the interpreter's teardown of the preloaded framework: lk-eval waits for
    this process to end before it writes a run's results, and finalizing the LiveKit stack
    was ~0.3 s of that wait (``bench/replay_phases.py``). The children are killed and reaped
    by now (``Server.serve``); only flushing is left."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    leave(main())
