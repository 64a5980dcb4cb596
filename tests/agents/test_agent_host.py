"""The agent-side host: the private livekit hooks it needs, and how it says one is missing."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TEST_AGENTS

from lkeval.agents import agent_host
from lkeval.agents.fork_client import ForkServer
from lkeval.agents.process import AgentLaunch, AgentProcess, agent_env


def test_installed_livekit_agents_has_every_hook() -> None:
    # CI runs this on the newest and the oldest supported livekit-agents
    assert agent_host.missing_hooks() == []


def test_a_missing_hook_stops_with_one_line_naming_it_and_the_range() -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(agent_host.HOST_DIR)!r})\n"
        "import agent_host\n"
        "agent_host.HOOKS = agent_host.HOOKS + (('livekit.agents.cli.cli', '_gone_in_2027'),)\n"
        "agent_host.fast_exit(agent_host.run('agent.py', '127.0.0.1:1', '{}'))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == agent_host.EXIT_UNSUPPORTED
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(agent_host.UNSUPPORTED_MARKER)
    assert "livekit.agents.cli.cli._gone_in_2027" in lines[0]
    assert agent_host.SUPPORTED_RANGE in lines[0]


SHADOWING = TEST_AGENTS / "shadowing" / "agent.py"


@pytest.mark.e2e
@pytest.mark.parametrize("start", ["cold", "warm"])
def test_the_agents_own_modules_are_not_shadowed_by_the_hosts(tmp_path: Path, start: str) -> None:
    """The host runs by path from lkeval/agents/, whose protocol.py, process.py ... must not
    win over the agent's own top-level modules of those names."""
    dispatch = tmp_path / "dispatch.json"
    dispatch.write_text('{"simulationRunId": "r", "jobId": "j", "scenario": {"id": "x"}}')
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "k"}
    launch = AgentLaunch(SHADOWING, env=env, cwd=tmp_path)
    server = None
    if start == "warm":
        server = ForkServer.start(sys.executable, agent_env(launch), agent=SHADOWING)
        launch = dataclasses.replace(launch, launcher=server)
    agent = AgentProcess(launch, dispatch, tmp_path / "agent.log")

    async def boot() -> None:
        try:
            conn = await agent.start(90)
            await conn.close()
        finally:
            await agent.stop(5)

    try:
        asyncio.run(boot())
    finally:
        if server is not None:
            server.close()
    assert agent.start_mode == start, (tmp_path / "agent.log").read_text()


TREE = """
import json, os, subprocess, sys, threading, time
sys.path.insert(0, {host_dir!r})
import agent_host
agent_host.become_subreaper()  # as the host: an orphan that called setsid stays in its tree
sleep = "import subprocess, time; time.sleep(60)"
leaving = ("import subprocess, sys; "
           "subprocess.Popen([sys.executable, '-c', %r], start_new_session=True)")
staying = "import subprocess, sys; subprocess.Popen([sys.executable, '-c', %r]).wait()"
subprocess.Popen([sys.executable, "-c", leaving % sleep]).wait()  # its child is orphaned
waiter = subprocess.Popen([sys.executable, "-c", staying % sleep])
done = threading.Event()
def from_a_thread():  # listed under this thread's children, not the main thread's
    subprocess.Popen([sys.executable, "-c", sleep])
    done.wait()
threading.Thread(target=from_a_thread).start()
while len(agent_host._tree_by_scan(os.getpid())) < 4:
    time.sleep(0.05)
walked = agent_host.process_tree(os.getpid())
scanned = agent_host._tree_by_scan(os.getpid())
agent_host._HAS_CHILDREN_LISTS = False  # a kernel without per-thread children lists
fallback = agent_host.process_tree(os.getpid())
parents = {{pid: int(agent_host.read_stat(pid)[1]) for pid, _ in walked}}
sessions = {{pid: os.getsid(pid) for pid, _ in walked}}
print(json.dumps({{"walked": sorted(walked), "scanned": sorted(scanned),
                  "fallback": sorted(fallback), "me": os.getpid(), "waiter": waiter.pid,
                  "parents": parents, "sessions": sessions, "my_session": os.getsid(0)}}))
agent_host.kill_processes(walked)
done.set()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_the_process_tree_walk_finds_what_a_scan_of_every_process_finds() -> None:
    """The host's tree (what its exit and lk-eval's stop kill): a child, its child, a child
    started from another thread, and an orphan that left the group with setsid, walked
    through the kernel's children lists, the same as the scan of every process it replaces;
    without those lists, the scan itself."""
    import json

    code = TREE.format(host_dir=agent_host.HOST_DIR)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert found["walked"] == found["scanned"] == found["fallback"]
    parents = {int(pid): parent for pid, parent in found["parents"].items()}
    sessions = {int(pid): sid for pid, sid in found["sessions"].items()}
    assert len(parents) == 4
    orphans = [p for p in parents if sessions[p] != found["my_session"]]
    assert len(orphans) == 1 and parents[orphans[0]] == found["me"]
    assert found["waiter"] in parents and found["waiter"] in parents.values()  # its child too
