"""The agent-side host: the private livekit hooks it needs, and how it says one is missing."""

from __future__ import annotations

import subprocess
import sys

from lkeval.agents import agent_host


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
