"""Booting an agent: the interpreter is checked first, and a boot that fails says why.

A boot failure shows the agent's own exception line from its log, not only an exit code;
``--python`` is checked once, before the first agent boots (exit 2, one line).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import HOTEL, TEST_AGENTS, clean_env, run_argv, run_lkeval

from lkeval.agents.cold import python_problem
from lkeval.agents.process import AgentFailure, AgentLaunch, AgentProcess
from lkeval.run.conversation import Conversation

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


@pytest.mark.e2e
def test_the_entrypoint_runs_before_prepared_and_the_session_only_after_go(
    tmp_path: Path,
) -> None:
    """The job's own set-up (its entrypoint up to ``AgentSession.start``) is done while the
    agent waits for its conversation slot; its session (greeting, timers, the console's
    connection) starts only with ``go``."""
    stage = tmp_path / "stage"
    env = {"STAGE_MARK": str(stage), "OPENAI_API_KEY": "sk-held-not-a-secret"}
    process = AgentProcess(
        AgentLaunch(TEST_AGENTS / "held_agent.py", env=env), DISPATCH, tmp_path / "agent.log"
    )

    async def stages() -> tuple[str, bool, str, list[str]]:
        try:
            await process.prepare(90)
            prepared = stage.read_text()
            assert process._listener is not None
            dialled = process._listener.accepted.done()
            conn = await process.connect(90)
            greeting, _ = await Conversation(conn, process, 30).wait_for_greeting(30)
            await conn.close()
            said = [i.text for i in greeting if i.kind == "message" and i.role == "assistant"]
            return prepared, dialled, stage.read_text(), said
        finally:
            await process.stop(5)

    prepared, dialled, after_go, greeting = asyncio.run(stages())
    assert prepared == "entrypoint" and not dialled
    assert after_go == "session" and greeting == ["Welcome to the held desk."]


@pytest.mark.e2e
def test_an_entrypoint_that_raises_hangs_or_starts_no_session_is_an_error_with_its_log(
    tmp_path: Path,
) -> None:
    """The entrypoint runs while the agent is prepared, before its conversation slot: one that
    raises is still its scenario's error with the reason it had when it ran after "go", one
    that hangs or returns without starting a session is an error once the boot timeout passes,
    and each one's log, masked, is published for the report (stopping an agent that never went
    must not make its host delete the raw log as if lk-eval were gone)."""
    secret = "lkc-boot-0123456789abcdef01234567"
    scenarios = tmp_path / "scenarios.yaml"
    turn = {"user": "hello", "expect": [{"message": {}}]}
    crash = {"id": "crash", "label": "Crash", "userdata": {"crash": True}, "turns": [turn]}
    hang = {"id": "hang", "label": "Hang", "userdata": {"hang": True}, "boot_timeout": 20}
    idle = {"id": "idle", "label": "Idle", "userdata": {"no_session": True}, "boot_timeout": 20}
    stuck = [{**hang, "turns": [turn]}, {**idle, "turns": [turn]}]
    scenarios.write_text(yaml.safe_dump({"name": "Boot", "scenarios": [crash, *stuck]}))
    results = tmp_path / "out" / "results.json"
    env = clean_env(CANARY_API_KEY=secret, CANARY_NAMES="CANARY_API_KEY")
    proc = run_lkeval(run_argv(TEST_AGENTS / "canary_agent.py", scenarios, results), env)
    assert proc.returncode == 3, proc.stdout + proc.stderr  # nothing could run
    by_id = {s["scenario_id"]: s for s in json.loads(results.read_text())["scenarios"]}
    assert {s["status"] for s in by_id.values()} == {"error"}, by_id
    crashed, hung = by_id["crash"]["attempts"][0], by_id["hang"]["attempts"][0]
    idled = by_id["idle"]["attempts"][0]
    assert crashed["reason"] == (
        "agent failed to boot: the agent's job crashed (its entrypoint raised): "
        "RuntimeError: could not connect with ***"
    )
    for stuck_attempt in (hung, idled):  # not a hang of lk-eval, and never a pass
        reason = stuck_attempt["reason"]
        assert reason.startswith("agent did not prepare") and "AgentSession.start" in reason
        assert "within 20s (boot timeout)" in reason, reason
    crash_log = Path(crashed["log_path"]).read_text()
    assert "RuntimeError: could not connect with ***" in crash_log and "Traceback" in crash_log
    assert "hanging with ***" in Path(hung["log_path"]).read_text()
    assert "no session for ***" in Path(idled["log_path"]).read_text()
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert secret[4:16] not in path.read_text(errors="replace"), path
    assert secret[4:16] not in proc.stdout + proc.stderr


def _dying_interpreter(tmp_path: Path, error_line: str) -> Path:
    """An "interpreter" that holds the agent's control channel without reading it, prints
    ``error_line`` as a failed import would, and exits 1: the scenario lk-eval sent is still
    unread when it dies, so lk-eval's next read of the channel is a connection reset."""
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nsleep 1\necho "{error_line}" >&2\nexit 1\n')
    python.chmod(0o755)
    return python


def _dying_boot(tmp_path: Path, error_line: str) -> tuple[Path, AgentFailure]:
    """Boot an agent with :func:`_dying_interpreter`; (that interpreter, the failure)."""
    python = _dying_interpreter(tmp_path, error_line)
    launch = AgentLaunch(TEST_AGENTS / "import_error_agent.py", python=str(python))
    process = AgentProcess(launch, DISPATCH, tmp_path / "agent.log")

    async def boot() -> None:
        try:
            await process.start(60)
        finally:
            await process.stop(5)

    with pytest.raises(AgentFailure) as info:
        asyncio.run(boot())
    return python, info.value


def test_a_reset_while_the_boot_fails_is_an_error_of_that_scenario(tmp_path: Path) -> None:
    """Issue 30.7: an agent that died with its scenario unread reset the control channel, and
    the ``ConnectionResetError`` ended the whole run as an internal error with no results. It
    is that scenario's boot failure, with the agent's own exception line and the likely fix
    (the agent's interpreter, ``--python``) for a module it could not import."""
    python, failure = _dying_boot(tmp_path, "ModuleNotFoundError: No module named 'voice_kit'")
    reason = failure.reason
    assert reason.startswith("agent failed to boot: agent process exited with code 1: "), reason
    assert "ModuleNotFoundError: No module named 'voice_kit'" in reason, reason
    assert f"the agent ran with {python}" in reason and "--python" in reason, reason


def test_another_exception_line_gets_no_python_hint(tmp_path: Path) -> None:
    _, failure = _dying_boot(tmp_path, "RuntimeError: the desk is closed")
    assert failure.reason == (
        "agent failed to boot: agent process exited with code 1: RuntimeError: the desk is closed"
    )
