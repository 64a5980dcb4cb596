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
from typing import Any

import psutil
import pytest
import yaml
from conftest import TEST_AGENTS, alive, assert_all_gone, clean_env, run_argv

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


def _assert_nothing_left_behind(tmpdir: Path, logs: Path) -> None:
    assert list(tmpdir.iterdir()) == [], "temp files left behind"
    for agent_dir in logs.glob("*.files"):  # only what the agent wrote may stay
        left = [p.name for p in agent_dir.iterdir() if p.is_symlink() or p.name == ".tmp"]
        assert left == [], f"{agent_dir}: {left}"


@pytest.mark.parametrize("start", ["warm", "cold"])
@pytest.mark.parametrize(
    "how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name
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
    cli = subprocess.Popen(
        [sys.executable, "-m", "lkeval", *argv, *(["--cold-start"] if start == "cold" else [])],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        agent_pid, grandchild = _wait_for_hang(pids_dir)
        time.sleep(1.0)  # let the second agent get prepared and wait for its slot
        started = {p.pid for p in psutil.Process(cli.pid).children(recursive=True)}
        assert agent_pid in started
        # the sleeper left the agent's session and group, and its parent exited: the agent
        # (a child subreaper) adopted it, so it is still in the tree
        assert os.getsid(grandchild) == grandchild != os.getsid(agent_pid)
        assert psutil.Process(grandchild).ppid() == agent_pid
        if start == "warm":  # the fork server, both forked agents, the sleeper's helper gone
            assert len(started) >= 3, started
        cli.send_signal(how)
        out, _ = cli.communicate(timeout=60)
    finally:
        if cli.poll() is None:
            cli.kill()
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
        await asyncio.sleep(1.0)
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


# --- a signal in every phase of a run (issue 19.4, 19.5) ------------------------------------
#
# Each phase is held open by the world around lk-eval, never by a sleep in the test: the judge
# model does not answer (preflight, judging), the interpreter that would become the fork server
# waits before it starts (fork-server), the agent never finishes importing (boot) or never
# answers the first turn (conversation), GitHub does not answer the PR comment (writing). The
# test signals lk-eval once the phase is reached, and every time: exit 130/143, the results
# file and JUnit written, nothing of lk-eval's left running or in TMPDIR.

HELD = TEST_AGENTS / "held_agent.py"
JUDGE = "held-judge"
PHASES = ("preflight", "fork-server", "boot", "conversation", "judging", "writing")
BEFORE_THE_ENGINE = ("preflight", "fork-server")
REPO, PR = "acme/held", 7


def _verdict(verdict: str) -> dict[str, object]:
    return {
        "name": "submit_verdict",
        "arguments": {"reasoning": f"the canary says {verdict}", "verdict": verdict},
    }


def _judge_rules(phase: str) -> list[dict[str, object]]:
    held = {"preflight": {}, "judging": {"last_user": "You said"}}
    first = [{"model": JUDGE, **held[phase], "hang": True}] if phase in held else []
    return [
        *first,
        {"model": JUDGE, "last_user": "I can't help with that", "tool_calls": [_verdict("fail")]},
        {"model": JUDGE, "tool_calls": [_verdict("pass")]},
    ]


def _held_scenarios(tmp_path: Path) -> Path:
    path = tmp_path / "held.yaml"
    scenario = {
        "id": "held1",
        "label": "Held one",
        "agent_expectations": "The agent repeats what the caller says.",
        "turns": [{"user": "hello", "expect": [{"message": {}}]}],
    }
    path.write_text(yaml.safe_dump({"name": "Held", "scenarios": [scenario]}))
    return path


def _held_python(tmp_path: Path) -> Path:
    """An interpreter that, started as the fork server, waits before it becomes one."""
    wrapper = tmp_path / "python"
    wrapper.write_text(
        "#!/bin/sh\n"
        'case "$*" in *fork_server.py*) echo $$ > "$HOLD_MARK"; sleep 600;; esac\n'
        f'exec {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def _actions_env(tmp_path: Path, gh_url: str) -> dict[str, str]:
    event = tmp_path / "event.json"
    pull = {"number": PR, "head": {"sha": "abc123", "repo": {"full_name": REPO, "fork": False}}}
    event.write_text(json.dumps({"number": PR, "pull_request": pull}))
    return {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_SHA": "merge999",
        "GITHUB_API_URL": gh_url,
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
        "GITHUB_TOKEN": "ghs_faketoken123456",
        "LKEVAL_GITHUB_TIMEOUT": "120",
    }


def _in_phase(phase: str, mark: Path, llm: LLMServer, gh: Any) -> bool:
    if phase in ("fork-server", "boot", "conversation"):
        return mark.exists() and mark.read_text().strip() != ""
    if phase == "writing":
        return bool(gh.requests)
    judged = [json.dumps(r.body) for r in llm.requests if r.body.get("model") == JUDGE]
    if phase == "preflight":
        return bool(judged)
    return any("You said" in body for body in judged)


# Every phase once per signal; the phases before the engine (where a Ctrl-C was once lost:
# issue 19.4) a second time.
ROUNDS = [(p, r) for p in PHASES for r in ((1, 2) if p in BEFORE_THE_ENGINE else (1,))]


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
@pytest.mark.parametrize(("phase", "rounds"), ROUNDS, ids=[f"{p}-round{r}" for p, r in ROUNDS])
def test_a_signal_in_any_phase_ends_the_run_with_what_it_has(
    tmp_path: Path, phase: str, how: signal.Signals, rounds: int
) -> None:
    from github_server import github_server

    tmpdir, mark = tmp_path / "tmp", tmp_path / "held.mark"
    tmpdir.mkdir()
    results, junit = tmp_path / "out" / "results.json", tmp_path / "out" / "junit.xml"
    argv = [*run_argv(HELD, _held_scenarios(tmp_path), results), "--junit", str(junit)]
    argv += ["--judge-model", JUDGE, "--concurrency", "1"]
    if phase == "fork-server":
        argv += ["--python", str(_held_python(tmp_path))]
    with LLMServer(_judge_rules(phase)) as llm, github_server() as gh:
        env = clean_env(
            OPENAI_BASE_URL=llm.base_url,
            OPENAI_API_KEY="k",
            TMPDIR=str(tmpdir),
            HOLD_AT=phase,
            HOLD_MARK=str(mark),
        )
        if phase == "writing":
            gh.fault, gh.slow_seconds = "slow", 60.0
            env.update(_actions_env(tmp_path, gh.base_url))
        cli = subprocess.Popen(
            [sys.executable, "-m", "lkeval", *argv],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 180
            while not _in_phase(phase, mark, llm, gh):
                assert cli.poll() is None, cli.communicate()
                assert time.monotonic() < deadline, f"lk-eval never reached {phase}"
                time.sleep(0.05)
            started = {p.pid for p in psutil.Process(cli.pid).children(recursive=True)}
            cli.send_signal(how)
            out, err = cli.communicate(timeout=90)
        finally:
            if cli.poll() is None:
                cli.kill()
    assert cli.returncode == 128 + how, out + err
    assert "partial results written" in err, out + err
    assert "Traceback" not in out + err
    data = json.loads(results.read_text())
    (scenario,) = data["scenarios"]
    if phase == "writing":  # the results were complete when GitHub held the comment
        assert scenario["status"] == "passed", scenario
    else:
        assert data["metadata"]["interrupted"] is True
        assert scenario["status"] != "passed", scenario
    if phase in BEFORE_THE_ENGINE:
        assert scenario["reason"] == "not run (interrupted)", scenario
    assert "Held one" in junit.read_text()
    assert not alive(started), "still alive when lk-eval had exited"
    assert list(tmpdir.iterdir()) == [], "temp files left behind"


# --- the fork server starts before the judge preflight (issue 20.4) -------------------------


def _marking_python(tmp_path: Path) -> Path:
    """An interpreter that notes its pid in ``$FORK_MARK`` when it becomes the fork server."""
    wrapper = tmp_path / "python"
    wrapper.write_text(
        "#!/bin/sh\n"
        'case "$*" in *fork_server.py*) echo $$ > "$FORK_MARK";; esac\n'
        f'exec {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def test_a_failed_preflight_stops_the_preloading_fork_server_and_boots_nothing(
    tmp_path: Path,
) -> None:
    """The fork server preloads while the judge preflight runs; the judge then fails (its
    connection dropped unanswered): exit 2 in one line, the fork server gone with lk-eval,
    no agent booted, nothing left in TMPDIR."""
    tmpdir, mark = tmp_path / "tmp", tmp_path / "fork.mark"
    tmpdir.mkdir()
    results = tmp_path / "out" / "results.json"
    argv = [*run_argv(HELD, _held_scenarios(tmp_path), results), "--judge-model", JUDGE]
    argv += ["--python", str(_marking_python(tmp_path))]
    llm = LLMServer([{"model": JUDGE, "hang": True}]).start()
    try:
        env = clean_env(
            OPENAI_BASE_URL=llm.base_url,
            OPENAI_API_KEY="k",
            TMPDIR=str(tmpdir),
            FORK_MARK=str(mark),
            LKEVAL_LLM_RETRIES="0",
        )
        cli = subprocess.Popen(
            [sys.executable, "-m", "lkeval", *argv],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 180
            # the preflight is under way and the fork server has started: both at once
            while not (llm.requests and mark.exists() and mark.read_text().strip()):
                assert cli.poll() is None, cli.communicate()
                assert time.monotonic() < deadline, "no preflight with a fork server starting"
                time.sleep(0.05)
            fork_server = int(mark.read_text())
            assert fork_server in alive({fork_server})
        finally:
            llm.stop()  # the judge's hanging asks are dropped unanswered: the preflight fails
        out, err = cli.communicate(timeout=90)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 2, out + err
    assert err.startswith("lk-eval: judge preflight: no verdict"), err
    assert len(err.splitlines()) == 1, err
    assert "warm starts" not in out and "[1/1]" not in out, out  # no launcher taken, no boot
    assert {r.body.get("model") for r in llm.requests} == {JUDGE}
    assert not results.exists()
    assert not alive({fork_server}), "the fork server outlived lk-eval"  # stopped, not left
    assert list(tmpdir.iterdir()) == [], "temp files left behind"
    agent_files = list((results.parent / "logs").glob("*")) if results.parent.exists() else []
    assert agent_files == [], agent_files
