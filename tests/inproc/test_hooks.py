"""The private livekit-agents names the in-process player relies on are checked up front, with
the line and the supported range the console's host gives (lkeval/inproc/hooks.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import TEST_AGENTS

from lkeval.cli import main
from lkeval.errors import ExitCode
from lkeval.host import agent_host
from lkeval.inproc import hooks
from lkeval.inproc.loader import load_server


def test_installed_livekit_agents_has_every_in_process_hook() -> None:
    # CI runs this on the newest and the oldest supported livekit-agents
    assert hooks.missing_module_hooks() == []
    assert hooks.missing_job_hooks() == []
    assert hooks.missing_server_hooks(load_server(TEST_AGENTS / "sim_end_agent.py")) == []


def test_a_missing_name_is_one_line_naming_it_and_the_supported_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from livekit.agents.simulation import SimulationContext

    monkeypatch.delattr(SimulationContext, "_begin_finalize")
    with pytest.raises(hooks.UnsupportedLivekitAgents) as raised:
        hooks.check_hooks()
    line = str(raised.value)
    assert line.startswith(agent_host.UNSUPPORTED_MARKER) and "\n" not in line
    assert "livekit.agents.simulation.SimulationContext._begin_finalize" in line
    assert agent_host.SUPPORTED_RANGE in line


def test_a_server_without_the_registered_entrypoint_is_named() -> None:
    with pytest.raises(hooks.UnsupportedLivekitAgents, match=r"AgentServer\._entrypoint_fnc"):
        hooks.check_hooks(object())


def test_lkeval_dev_stops_with_the_line_before_anything_plays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from livekit.agents.ipc import mock_room

    monkeypatch.delattr(mock_room, "create_mock_room")
    scenarios = tmp_path / "scenarios.yaml"
    scenarios.write_text("scenarios:\n  - label: Hi\n    turns:\n      - user: Hi\n")
    results = tmp_path / "out" / "results.json"
    argv = ["dev", "--no-settings", "--agent", str(TEST_AGENTS / "sim_end_agent.py")]
    code = main([*argv, "--scenarios", str(scenarios), "--results", str(results)])
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE
    assert "livekit.agents.ipc.mock_room.create_mock_room" in err
    assert agent_host.SUPPORTED_RANGE in err and "Traceback" not in err
    assert not results.exists()  # nothing played, nothing written
