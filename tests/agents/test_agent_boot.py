"""Booting an agent: the interpreter is checked first, and a boot that fails says why.

A boot failure shows the agent's own exception line from its log, not only an exit code;
``--python`` is checked once, before the first agent boots (exit 2, one line).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HOTEL, TEST_AGENTS, clean_env, run_argv, run_lkeval

from lkeval.agents.cold import python_problem
from lkeval.agents.process import AgentFailure, AgentLaunch, AgentProcess

DISPATCH = '{"simulationRunId": "r", "jobId": "j", "scenario": {"id": "x"}}'


def _run_with_python(tmp_path: Path, python: str) -> subprocess.CompletedProcess[str]:
    argv = run_argv(HOTEL / "agent.py", HOTEL / "scenarios.yaml", tmp_path / "r.json")
    return run_lkeval([*argv, "--python", python], clean_env(), timeout=120)


def test_a_missing_python_is_one_line_before_anything_boots(tmp_path: Path) -> None:
    proc = _run_with_python(tmp_path, str(tmp_path / "no-such-venv" / "bin" / "python"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"--python: {tmp_path}/no-such-venv/bin/python: no such interpreter" in proc.stderr
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "logs").exists()


def test_a_python_without_livekit_agents_is_refused_by_name(tmp_path: Path) -> None:
    venv = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    assert python_problem(python) == f"livekit-agents is not installed for {python}"
    assert python_problem(sys.executable) is None
    proc = _run_with_python(tmp_path, python)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"livekit-agents is not installed for {python}" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "logs").exists()


def _boot_failure(agent: Path, tmp_path: Path, env: dict[str, str]) -> AgentFailure:
    process = AgentProcess(AgentLaunch(agent, env=env), DISPATCH, tmp_path / "agent.log")

    async def boot() -> None:
        try:
            conn = await process.start(90)
            await conn.close()
        finally:
            await process.stop(5)

    with pytest.raises(AgentFailure) as info:
        asyncio.run(boot())
    return info.value


@pytest.mark.e2e
def test_an_agent_file_without_a_server_shows_the_cli_error(tmp_path: Path) -> None:
    failure = _boot_failure(TEST_AGENTS / "no_server_agent.py", tmp_path, {})
    assert "exited with code 1" in failure.reason, failure.reason
    assert "CLIError: Could not find" in failure.reason, failure.reason


@pytest.mark.e2e
def test_an_entrypoint_without_credentials_shows_the_openai_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    failure = _boot_failure(TEST_AGENTS / "missing_key_agent.py", tmp_path, {})
    assert "job crashed" in failure.reason, failure.reason
    assert "openai.OpenAIError: " in failure.reason and "api_key" in failure.reason, failure.reason
