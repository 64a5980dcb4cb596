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
    args: list[str], env: dict[str, str], timeout: float = 240, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a child process, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "lkeval", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


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
