"""The agent's recorder covers an HTTP library imported after it was installed, and imports
none itself: in a fresh interpreter, as the agent host loads it (by path, before the agent's
module), then the library imported and used with its server gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from lkeval.host import agent_host, transports
from lkeval.host import tape as tp
from lkeval.testing.llm_server import LLMServer

# The agent's side: the recorder installed from the environment, then the libraries.
CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
import agent_host
agent_host.load_tape().install_from_env()
libraries = ("httpx", "httpx2", "aiohttp", "requests")
before = sorted(n for n in libraries if n in sys.modules)
import httpx
body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
answer = httpx.post(sys.argv[2], json=body).json()
print(json.dumps({"imported_by_install": before, "answer": answer}))
"""


def _recorded(base_url: str) -> tuple[str, list[dict[str, object]]]:
    """One chat completion recorded live in this process: (its url, the exchanges)."""
    events: list[dict[str, object]] = []
    tape = tp.Tape("agent", "record", [], tp.Rules(), events.append)

    def resolve() -> tp.Tape:
        return tape

    transports.install(resolve)
    try:
        url = f"{base_url}/chat/completions"
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        httpx.post(url, json=body).raise_for_status()
    finally:
        transports.uninstall(resolve)
    return url, [e["exchange"] for e in events if "exchange" in e]  # type: ignore[misc]


def test_a_library_imported_after_the_install_is_replayed_and_none_is_imported_by_it(
    tmp_path: Path,
) -> None:
    with LLMServer() as llm:
        url, exchanges = _recorded(llm.base_url)
        recorded_answer = json.loads(b"".join(tp.response_chunks(exchanges[0]["response"])))  # type: ignore[arg-type]
    assert len(exchanges) == 1
    child, out = _run_on_tape(tmp_path, exchanges, CHILD, url)
    assert child["imported_by_install"] == []
    assert child["answer"] == recorded_answer  # from the tape: the server is gone
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert set(events[0]["installed"]) == {"httpx", "httpx2", "aiohttp", "requests"}
    replayed = [e["exchange"] for e in events if "exchange" in e]
    assert [x["replayed"] for x in replayed] == [True]
    assert not any("live" in e or "miss" in e for e in events)


def test_an_uninstalled_resolver_is_not_patched_in_later() -> None:
    """A resolver taken back before its library was imported is not registered on import."""

    def resolve() -> None:
        return None

    transports._PatchOnImport.arm("no_such_library_for_lkeval", resolve)  # type: ignore[arg-type]
    assert any(isinstance(f, transports._PatchOnImport) for f in sys.meta_path)
    transports._PatchOnImport.disarm(resolve)  # type: ignore[arg-type]
    assert "no_such_library_for_lkeval" not in transports._PatchOnImport.armed
    if not transports._PatchOnImport.armed:
        assert not any(isinstance(f, transports._PatchOnImport) for f in sys.meta_path)
    with pytest.raises(ImportError):
        __import__("no_such_library_for_lkeval")


# The fork server's side: the recorder loaded before any fork, then a child's host starting
# its tape from that very module.
PRELOADED = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
import agent_host
server = agent_host.sibling("fork_server")
host = server.agent_host
dict(server.WARM_CALLS)["replay recorder"]()
loaded = sys.modules["_lkeval_transports"]
patched_before = [type(f).__name__ for f in sys.meta_path if "Patch" in type(f).__name__]
host.start_tape()
print(json.dumps({
    "same_module": sys.modules["_lkeval_transports"] is loaded,
    "patched_by_loading": patched_before,
    "patched_by_start": [type(f).__name__ for f in sys.meta_path if "Patch" in type(f).__name__],
}))
"""


def test_the_fork_server_loads_the_recorder_once_and_a_child_installs_that_module(
    tmp_path: Path,
) -> None:
    """Loading (in the fork server, before it forks) patches nothing; the child's tape is
    installed from the module already loaded, not a second copy of its files."""
    child, out = _run_on_tape(tmp_path, [], PRELOADED)
    assert child == {
        "same_module": True,
        "patched_by_loading": [],
        "patched_by_start": ["_PatchOnImport"],
    }
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert "installed" in events[0]


def _run_on_tape(
    tmp_path: Path, exchanges: list[dict[str, object]], script: str, *args: str
) -> tuple[dict[str, Any], Path]:
    """Run ``script`` in a fresh interpreter (agent_host's folder first on its path) with a
    replay tape of ``exchanges``; its last stdout line as JSON, and the tape's out file."""
    spec = tmp_path / "tape.json"
    out = tmp_path / "tape-out.jsonl"
    spec.write_text(json.dumps({"mode": "replay", "rules": {}, "exchanges": exchanges}))
    out.write_text("")
    env = {**os.environ, tp.TAPE_ENV: str(spec), tp.TAPE_OUT_ENV: str(out)}
    host_dir = os.path.dirname(agent_host.__file__)
    proc = subprocess.run(
        [sys.executable, "-c", script, host_dir, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1]), out
