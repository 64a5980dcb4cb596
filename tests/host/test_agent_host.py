"""The agent-side host: the private livekit hooks it needs, and how it says one is missing."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TEST_AGENTS

from lkeval.agents.fork_client import ForkServer
from lkeval.agents.process import AgentLaunch, AgentProcess, agent_env
from lkeval.host import agent_host


def test_installed_livekit_agents_has_every_hook() -> None:
    # CI runs this on the newest and the oldest supported livekit-agents
    assert agent_host.missing_hooks() == []


def test_a_missing_hook_stops_with_one_line_naming_it_and_the_range() -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(agent_host.HOST_DIR)!r})\n"
        "import agent_host\n"
        "agent_host.HOOKS = agent_host.HOOKS + (('livekit.agents.cli.cli', '_gone_in_2027'),)\n"
        "agent_host.tree.fast_exit(agent_host.run('agent.py', '127.0.0.1:1', '{}'))\n"
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
