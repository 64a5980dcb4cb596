"""Shared test plumbing: the local LLM server, the CLI as a subprocess, a clean environment."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from lkeval.testing.llm_server import LLMServer

ROOT = Path(__file__).resolve().parent.parent
HOTEL = ROOT / "examples" / "hotel"
TEST_AGENTS = Path(__file__).resolve().parent / "agents"
TEST_DATA = Path(__file__).resolve().parent / "data"

#: The suite's dearest module (one recording and three replays of twenty scenarios), handed out
#: first by ``make test``.
FIRST = ("test_e2e_replay_twenty.py",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules that boot agents (any test marked e2e) run first, the unit modules after.

    ``make test`` hands whole modules to the xdist workers in this order
    (``--no-loadscope-reorder``): the dear ones start while every worker is busy, and the
    many short unit modules fill the end, so no worker sits idle while another finishes a
    minute-long replay it was handed last. xdist's own order (most tests first) did just that:
    a module of one or two long tests came last. The dearest module of all (:data:`FIRST`)
    goes out before any other, so that its minutes overlap the whole rest of the suite. A
    stable sort: each module keeps its order.
    """
    boots = {item.path for item in items if item.get_closest_marker("e2e")}
    items.sort(key=lambda item: (item.path.name not in FIRST, item.path not in boots))


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for a child lkeval: no GitHub Actions context unless a test sets one,
    no real LLM endpoints or keys from the developer's shell."""
    drop = ("GITHUB_", "INPUT_", "OPENAI_", "LKEVAL_", "LIVEKIT_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop) and k != "CI"}
    env.update(extra)
    return env


def fake_lkeval(where: Path, main: str) -> Path:
    """A stand-in ``lkeval`` package under ``where`` (for ``PYTHONPATH``): ``python -m lkeval``
    runs ``main``, while every other module (``lkeval.text``, which the entrypoint masks with)
    is the real one, as in the image."""
    import lkeval

    package = where / "lkeval"
    package.mkdir(parents=True, exist_ok=True)
    real = str(Path(lkeval.__file__).parent)
    (package / "__init__.py").write_text(f"__path__.append({real!r})\n")
    (package / "__main__.py").write_text(main)
    return where


def hotel_env(llm: LLMServer, **extra: str) -> dict[str, str]:
    """Environment that points the example agent at the local LLM."""
    return clean_env(
        OPENAI_BASE_URL=llm.base_url,
        OPENAI_API_KEY="test-key-not-secret",
        HOTEL_AGENT_MODEL="hotel-agent",
        **extra,
    )


def run_argv(agent: Path | str, scenarios: Path | str, results: Path | str) -> list[str]:
    """``lkeval run`` with its three everyday flags and one attempt per scenario (``--repeat
    1``: the sequential test, the default, has its own tests); a test appends what it is
    about."""
    return [
        "run", "--agent", str(agent), "--scenarios", str(scenarios), "--results", str(results),
        "--repeat", "1",
    ]  # fmt: skip


def run_lkeval(
    args: list[str],
    env: dict[str, str],
    timeout: float = 240,
    cwd: Path | None = None,
    before: Callable[[], object] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a child process, as a user would; ``before`` runs in the child
    before it execs (it joins a memory cgroup: tests/memory_cgroup.py)."""
    return subprocess.run(
        [sys.executable, "-m", "lkeval", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        preexec_fn=before,
    )


@contextlib.contextmanager
def lkeval_process(
    args: list[str], env: dict[str, str], stderr: int = subprocess.PIPE
) -> Iterator[subprocess.Popen[str]]:
    """The real CLI started in a child process, for a test that acts on it while it runs
    (signals it, waits for a phase); killed and reaped if it is still running at the end."""
    cli = subprocess.Popen(
        [sys.executable, "-m", "lkeval", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    try:
        yield cli
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def reset_connections(port: int) -> None:
    """Reset connections to a loopback server the ways a cancelled client does: mid-request
    (three times) and before sending anything. ``SO_LINGER`` with a zero timeout turns
    ``close()`` into a TCP reset."""
    linger = struct.pack("ii", 1, 0)
    for partial in (b"POST /v1/chat/completions HTTP/1.1\r\n",) * 3 + (b"",):
        sock = socket.create_connection(("127.0.0.1", port))
        if partial:
            sock.sendall(partial)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        sock.close()


def reset_then_ask(port: int, ask: Callable[[], object]) -> None:
    """Reset connections to the server on ``port``, then ``ask`` it something (it must still
    answer); returns once every handler that saw a reset is done, so the caller's stderr check
    sees whatever they printed."""
    before = set(threading.enumerate())
    reset_connections(port)
    assert ask(), "the server stopped answering after the resets"
    # accepted in order, so every reset's handler has started by now: wait for those running
    handlers = [t for t in threading.enumerate() if t not in before]
    for thread in handlers:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in handlers)


def alive(pids: Iterable[int]) -> set[int]:
    """The processes among ``pids`` still running (a zombie has ended: only its parent's wait
    is missing)."""
    running = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                running.add(pid)
        except psutil.NoSuchProcess:
            pass
    return running


def assert_all_gone(pids: Iterable[int], timeout: float = 60) -> None:
    """Wait until none of ``pids`` runs, or fail naming those left.

    A SIGKILLed process ends when the kernel next schedules it, which on a loaded machine is
    not "at once": the deadline is generous (the processes tested sleep for 10 minutes), so
    only a process nobody stopped can reach it."""
    pids = set(pids)
    deadline = time.monotonic() + timeout
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = {}
    for pid in alive(pids):
        with contextlib.suppress(psutil.NoSuchProcess):
            left[pid] = " ".join(psutil.Process(pid).cmdline())[:120]
    assert not left, f"still alive: {left}"


@pytest.fixture
def sleeper(tmp_path: Path) -> Path:
    """A stand-in interpreter that only sleeps: a fork server that never gets ready, for tests
    of who starts, keeps and stops it."""
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nexec sleep 600\n")
    python.chmod(0o755)
    return python


@pytest.fixture
def hotel_llm() -> Iterator[LLMServer]:
    with LLMServer.from_file(HOTEL / "llm_rules.yaml") as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_process_masker() -> Iterator[None]:
    """Secrets registered by one in-process test (a token, ``--env`` values) stay its own."""
    from lkeval.text.masking import reset_process_masker

    reset_process_masker()
    yield
    reset_process_masker()


def _children() -> dict[int, str]:
    """This process's children (pid: state letter, ``Z`` for a zombie), from
    ``/proc/self/task/*/children`` (empty where the kernel has no such file): one small read per
    thread, not a scan of every process on the machine."""
    found: dict[int, str] = {}
    with contextlib.suppress(OSError):
        for task in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError):
                for pid in Path(f"/proc/self/task/{task}/children").read_text().split():
                    with contextlib.suppress(OSError, IndexError):
                        stat = Path(f"/proc/{pid}/stat").read_text()
                        found[int(pid)] = stat.rsplit(")", 1)[1].split()[0]
    return found


def _describe(pid: int, state: str) -> str:
    with contextlib.suppress(OSError):
        name = Path(f"/proc/{pid}/comm").read_text().strip()
        if state == "Z":
            return f"{pid} {name} (a zombie: ended, never waited for)"
        cmdline = Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ").strip()
        return f"{pid} {cmdline[:120] or name} (still running)"
    return str(pid)


def _reap(pids: Iterable[int]) -> None:
    """Kill and wait for ``pids`` (this process's children), so the next module starts clean."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)


@pytest.fixture(autouse=True, scope="module")
def _module_reaps_what_it_starts() -> Iterator[None]:
    """Every process a test module starts is stopped and waited for by the module itself.

    A child that ends and is never waited for stays a zombie of the pytest worker until the
    session ends (20 were seen on one worker); one still running holds ports, files and CPU
    into other modules' tests. Checked once per module, after its own fixtures' teardown; the
    short wait lets an asynchronous reaper (asyncio's child watcher thread) finish."""
    before = set(_children())
    yield
    left = {pid: state for pid, state in _children().items() if pid not in before}
    deadline = time.monotonic() + 5
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = {pid: state for pid, state in _children().items() if pid in left}
    described = [_describe(pid, state) for pid, state in sorted(left.items())]
    _reap(left)
    assert not described, f"processes this module started and did not reap: {described}"


def _child_subreaper(on: bool | None = None) -> bool:
    """Whether this process is a child subreaper (Linux ``prctl``); with ``on``, set it first."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    from lkeval.host.tree import PR_SET_CHILD_SUBREAPER

    prctl = ctypes.CDLL(None).prctl
    if on is not None:
        prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)
    flag = ctypes.c_int(0)
    prctl(PR_SET_CHILD_SUBREAPER + 1, ctypes.byref(flag), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER
    return bool(flag.value)


@pytest.fixture(autouse=True)
def _no_adoption_outlives_its_test() -> Iterator[None]:
    """``lkeval run`` in this process (a test of the CLI's early checks) makes it adopt orphans
    as lk-eval's CLI does: a child subreaper whose final sweep kills its other children. Undone
    after the test: left on, every process orphaned later in this worker (an agent of a killed
    lk-eval, a shell's child) would be re-parented to the worker and never reaped, and a later
    in-process run's sweep would kill the children of other tests' fixtures."""
    from lkeval.agents import orphans

    adopting = orphans._ADOPTING, _child_subreaper()
    yield
    orphans._ADOPTING = adopting[0]
    if _child_subreaper() != adopting[1]:
        _child_subreaper(adopting[1])
