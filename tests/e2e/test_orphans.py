"""Zero orphans: every agent, cold or forked, dies with lk-eval, whatever way lk-eval ends.

Each run has two scenarios at concurrency 1: the first agent is stuck in a tool that blocks
its event loop (no graceful exit) after starting a grandchild that called ``setsid`` (out of the
agent's process group); the second agent is prepared and waiting for its conversation slot.
lk-eval then ends by SIGINT, SIGTERM, SIGKILL (through the real CLI) or by an exception in the
process that runs the engine. Afterwards no process lk-eval started, directly or not, is alive,
and nothing is left in TMPDIR or in the agents' own directories but what the agents wrote.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import yaml
from conftest import TEST_AGENTS, assert_all_gone, clean_env, lkeval_process, run_argv

from lkeval.agents.fork_client import ForkServer
from lkeval.agents.process import AgentLaunch, agent_env
from lkeval.results.model import ScenarioResult
from lkeval.run.attempt import RunSettings
from lkeval.run.engine import Engine, EngineOptions, attempt_factory
from lkeval.scenarios.loader import load_or_raise
from lkeval.testing.llm_server import LLMServer

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="walks /proc"),
]

AGENT = TEST_AGENTS / "hung_tool_agent.py"
RULES = [
    {"model": "hung-agent", "last_user": "hang", "tool_calls": [{"name": "hang"}]},
    {"model": "hung-agent", "text": "OK."},
]


@pytest.fixture
def llm() -> Iterator[LLMServer]:
    with LLMServer(RULES) as server:
        yield server


def _scenarios(tmp_path: Path) -> Path:
    path = tmp_path / "scenarios.yaml"
    turn = {"user": "please hang", "expect": [{"message": {}}]}
    scenarios = [{"id": f"stuck{n}", "label": f"Stuck {n}", "turns": [turn]} for n in (1, 2)]
    path.write_text(yaml.safe_dump({"name": "Orphans", "scenarios": scenarios}))
    return path


def _wait_for_hang(pids_dir: Path, timeout: float = 120) -> tuple[int, int]:
    """(agent pid, grandchild pid) once the first agent is inside its hung tool."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        agents = list(pids_dir.glob("*.agent"))
        grandchildren = list(pids_dir.glob("*.grandchild"))
        if agents and grandchildren:
            return int(agents[0].stem), int(grandchildren[0].stem)
        time.sleep(0.1)
    raise AssertionError("no agent reached its hung tool")


def _wait_for_prepared(pids_dir: Path, agents: int = 2, timeout: float = 120) -> set[int]:
    """The agents' pids once ``agents`` of them are prepared (their prewarm ran): the second
    one is then waiting for its conversation slot."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        prepared = {int(p.stem) for p in pids_dir.glob("*.prewarmed")}
        if len(prepared) >= agents:
            return prepared
        time.sleep(0.05)
    raise AssertionError(f"fewer than {agents} agents were prepared")


def _assert_nothing_left_behind(tmpdir: Path, logs: Path) -> None:
    assert list(tmpdir.iterdir()) == [], "temp files left behind"
    for agent_dir in logs.glob("*.files"):  # only what the agent wrote may stay
        left = [p.name for p in agent_dir.iterdir() if p.is_symlink() or p.name == ".tmp"]
        assert left == [], f"{agent_dir}: {left}"


#: Every signal with forked agents; cold ones by SIGTERM and SIGKILL. SIGINT and SIGTERM reach
#: one handler in lk-eval (lkeval/run/interrupt.py), which stops cold agents the same way
#: whichever it was; what SIGINT itself does (exit 130, partial results) is the warm case's.
ENDINGS = [
    *((signal.SIGINT, "warm"), (signal.SIGTERM, "warm"), (signal.SIGKILL, "warm")),
    *((signal.SIGTERM, "cold"), (signal.SIGKILL, "cold")),
]


@pytest.mark.parametrize(
    ("how", "start"), ENDINGS, ids=[f"{how.name}-{start}" for how, start in ENDINGS]
)
def test_no_agent_outlives_the_cli(
    tmp_path: Path, llm: LLMServer, start: str, how: signal.Signals
) -> None:
    pids_dir, tmpdir = tmp_path / "pids", tmp_path / "tmp"
    pids_dir.mkdir()
    tmpdir.mkdir()
    results = tmp_path / "out" / "results.json"
    argv = [*run_argv(AGENT, _scenarios(tmp_path), results), "--concurrency", "1"]
    env = clean_env(
        OPENAI_BASE_URL=llm.base_url,
        OPENAI_API_KEY="k",
        TMPDIR=str(tmpdir),
        HUNG_PIDS_DIR=str(pids_dir),
    )
    if start == "cold":
        argv.append("--cold-start")
    with lkeval_process(argv, env, stderr=subprocess.STDOUT) as cli:
        agent_pid, grandchild = _wait_for_hang(pids_dir)
        agents = _wait_for_prepared(pids_dir)  # the second one waits for its slot
        started = {p.pid for p in psutil.Process(cli.pid).children(recursive=True)}
        assert agent_pid in agents and agents <= started
        # the sleeper left the agent's session and group, and its parent exited: the agent
        # (a child subreaper) adopted it, so it is still in the tree
        assert os.getsid(grandchild) == grandchild != os.getsid(agent_pid)
        assert psutil.Process(grandchild).ppid() == agent_pid
        if start == "warm":  # the fork server, both forked agents, the sleeper's helper gone
            assert len(started) >= 3, started
        cli.send_signal(how)
        out, _ = cli.communicate(timeout=60)
    if how != signal.SIGKILL:
        assert cli.returncode == 128 + how, out
        assert "partial results written" in out, out
        data = json.loads(results.read_text())
        (attempt,) = data["scenarios"][0]["attempts"]  # how its agent started, per attempt
        assert attempt["start_mode"] == start and data["metadata"]["start_mode"] == start
        assert attempt["cold_start_reason"] == ("--cold-start" if start == "cold" else "")
    assert_all_gone(started | {grandchild})
    _assert_nothing_left_behind(tmpdir, results.parent / "logs")


class _Quiet:
    def scenario_started(self, scenario_id: str, label: str) -> None:
        pass

    def scenario_finished(self, result: ScenarioResult) -> None:
        pass


@pytest.mark.parametrize("start", ["warm", "cold"])
def test_no_agent_outlives_an_exception_in_the_engines_process(
    tmp_path: Path, llm: LLMServer, start: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids_dir, tmpdir = tmp_path / "pids", tmp_path / "tmp"
    pids_dir.mkdir()
    tmpdir.mkdir()
    for key, value in clean_env(TMPDIR=str(tmpdir), HUNG_PIDS_DIR=str(pids_dir)).items():
        monkeypatch.setenv(key, value)
    launch = AgentLaunch(AGENT, env={"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "k"})
    server = (
        ForkServer.start(sys.executable, agent_env(launch), agent=AGENT)
        if start == "warm"
        else None
    )
    groups, _ = load_or_raise([_scenarios(tmp_path)])
    logs = tmp_path / "logs"
    settings = RunSettings(
        launch=AgentLaunch(launch.agent, env=launch.env, launcher=server),
        logs_dir=logs,
        work_dir=logs,
        stop_grace=2,
    )
    engine = Engine(attempt_factory(settings, None), _Quiet(), EngineOptions(concurrency=1))
    seen: set[int] = set()

    async def boom() -> None:
        await asyncio.get_running_loop().run_in_executor(None, _wait_for_hang, pids_dir)
        await asyncio.get_running_loop().run_in_executor(None, _wait_for_prepared, pids_dir)
        seen.update(p.pid for p in psutil.Process().children(recursive=True))
        seen.update(int(p.stem) for p in pids_dir.glob("*.grandchild"))
        raise RuntimeError("lk-eval hit a bug")

    async def main() -> None:
        await asyncio.gather(engine.run(groups[0].scenarios), boom())

    try:
        with pytest.raises(RuntimeError, match="hit a bug"):
            asyncio.run(main())
        if server is not None:
            seen.discard(server.pid)  # the run's launcher outlives one engine run by design
    finally:
        if server is not None:
            server.close()
    assert seen
    assert_all_gone(seen)
    _assert_nothing_left_behind(tmpdir, logs)


@pytest.mark.parametrize("start", ["warm", "cold"])
def test_what_a_crashed_agent_left_behind_is_stopped_by_the_end_of_the_run(
    tmp_path: Path, llm: LLMServer, start: str
) -> None:
    """The agent exits on its own mid-tool, leaving a setsid sleeper: it is adopted by the fork
    server (warm) or by lk-eval itself (cold), both child subreapers, and stopped."""
    pids_dir = tmp_path / "pids"
    pids_dir.mkdir()
    results = tmp_path / "out" / "results.json"
    argv = [*run_argv(AGENT, _scenarios(tmp_path), results), "--concurrency", "1"]
    env = clean_env(
        OPENAI_BASE_URL=llm.base_url,
        OPENAI_API_KEY="k",
        HUNG_TOOL_CRASH="1",
        HUNG_PIDS_DIR=str(pids_dir),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "lkeval", *argv, *(["--cold-start"] if start == "cold" else [])],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode != 0 and "exited with code 3" in proc.stdout, proc.stdout + proc.stderr
    sleepers = {int(p.stem) for p in pids_dir.glob("*.grandchild")}
    assert len(sleepers) == 2, sleepers  # one per scenario
    assert_all_gone(sleepers)
