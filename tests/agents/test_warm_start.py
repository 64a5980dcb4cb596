"""Warm starts: agents forked by lkeval/host/fork_server.py behave exactly like cold ones.

The agent-booting tests share one fork server (its preload costs ~2 s of CPU) and drive the
engine in-process, cold and warm, so the comparison is of the same code path with only the
start mode changed. The PDEATHSIG test speaks the server's protocol directly, so that nothing
but the kernel's death signal can be what kills the children.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import HOTEL, TEST_AGENTS

from lkeval.agents.fork_client import (
    SERVER_SCRIPT,
    ForkedProcess,
    ForkServer,
    ForkServerError,
)
from lkeval.agents.interface import SpawnRequest
from lkeval.agents.launch import begin_launcher
from lkeval.agents.plugins import agent_plugins
from lkeval.agents.process import AgentLaunch, AgentProcess, agent_env
from lkeval.results.model import FORMAT_VERSION, Attempt, ScenarioResult, run_start_mode
from lkeval.results.results_json import results_from_dict
from lkeval.run.attempt import RunSettings
from lkeval.run.engine import Engine, EngineOptions, attempt_factory
from lkeval.scenarios.loader import load_or_raise
from lkeval.testing.llm_server import LLMServer


class RecordingServer(ForkServer):
    """A fork server that remembers what it forked, to prove a run really was warm."""

    spawned: list[int]

    async def spawn(self, request: SpawnRequest, timeout: float = 30.0) -> ForkedProcess:
        child = await super().spawn(request, timeout)
        self.spawned.append(child.pid)
        return child


@pytest.fixture(scope="module")
def fork_server() -> Iterator[RecordingServer]:
    server = RecordingServer.start(
        sys.executable, agent_env(AgentLaunch(HOTEL / "agent.py")), agent=HOTEL / "agent.py"
    )
    server.spawned = []
    try:
        yield server
    finally:
        server.close()


class _Quiet:
    def scenario_started(self, scenario_id: str, label: str) -> None:
        pass

    def scenario_finished(self, result: ScenarioResult) -> None:
        pass


def _run(launch: AgentLaunch, scenarios_file: Path, tmp: Path) -> dict[str, ScenarioResult]:
    groups, _ = load_or_raise([scenarios_file])
    scenarios = [s for g in groups for s in g.scenarios]
    settings = RunSettings(
        launch=launch, logs_dir=tmp / "logs", work_dir=tmp / "work", boot_timeout=60
    )
    engine = Engine(
        attempt_factory(settings, None), _Quiet(), EngineOptions(concurrency=2, repeat=1)
    )
    return {r.scenario_id: r for r in asyncio.run(engine.run(scenarios))}


def _comparable(result: ScenarioResult) -> dict[str, Any]:
    """Everything a user sees of a result except timings, paths and random call ids."""
    (attempt,) = result.attempts
    return {
        "status": result.status,
        "reason": result.reason,
        "transcript": [
            (
                i.kind,
                i.turn,
                i.role,
                i.text,
                i.name,
                i.arguments,
                i.output,
                i.is_error,
                i.old_agent,
                i.new_agent,
            )
            for i in attempt.transcript
        ],
        "expectations": attempt.expectations,
        "verdicts": attempt.verdicts,
        "end_reason": attempt.end_reason,
    }


def _hotel_launch(llm: LLMServer, launcher: ForkServer | None) -> AgentLaunch:
    env = {
        "OPENAI_BASE_URL": llm.base_url,
        "OPENAI_API_KEY": "test-key-not-secret",
        "HOTEL_AGENT_MODEL": "hotel-agent",
    }
    return AgentLaunch(HOTEL / "agent.py", env=env, launcher=launcher)


@pytest.mark.e2e
def test_cold_and_warm_runs_give_identical_results(
    tmp_path: Path, hotel_llm: LLMServer, fork_server: RecordingServer
) -> None:
    scenarios = HOTEL / "scenarios.yaml"
    cold = _run(_hotel_launch(hotel_llm, None), scenarios, tmp_path / "cold")
    before = len(fork_server.spawned)
    warm = _run(_hotel_launch(hotel_llm, fork_server), scenarios, tmp_path / "warm")
    assert len(fork_server.spawned) - before == 3  # the three scripted scenarios were forked

    assert cold.keys() == warm.keys()
    for scenario_id in cold:
        if cold[scenario_id].status == "skipped":  # needs a simulated user: never boots
            assert warm[scenario_id].status == "skipped"
            continue
        assert _comparable(warm[scenario_id]) == _comparable(cold[scenario_id]), scenario_id
    assert warm["SCN_checkDouble01"].status == "passed"
    assert warm["SCN_bookAda01"].status == "passed"
    # the scenario's userdata reached the forked agent: its on_simulation_end vetoed Grace
    veto = warm["SCN_vetoGrace01"]
    assert veto.status == "failed" and "agent veto" in veto.reason and "Grace" in veto.reason
    log = Path(veto.attempts[0].log_path or "").read_text()
    assert "conversation_item_added" in log and "lk-eval: warm start failed" not in log
    # how fast the warm boots were is BENCHMARKS' business; that they were forked is above


@pytest.mark.e2e
def test_a_crashing_warm_agent_is_reported_like_a_cold_one(
    tmp_path: Path, fork_server: RecordingServer
) -> None:
    rules = [
        {"model": "faulty-agent", "last_user": "explode", "tool_calls": [{"name": "explode"}]},
        {"model": "faulty-agent", "text": "Fine."},
    ]
    path = tmp_path / "scenarios.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "Faults",
                "scenarios": [
                    {
                        "id": "crash",
                        "label": "Crashes mid-turn",
                        "userdata": {"fault": "exit_in_tool"},
                        "turns": [{"user": "please explode"}, {"user": "still there?"}],
                    },
                    {
                        "id": "raises",
                        "label": "Entrypoint raises",
                        "userdata": {"fault": "raise_in_entrypoint"},
                        "turns": [{"user": "hello"}],
                    },
                ],
            }
        )
    )
    before = len(fork_server.spawned)
    with LLMServer(rules) as llm:
        launch = AgentLaunch(
            TEST_AGENTS / "faulty_agent.py",
            launcher=fork_server,
            env={"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "k"},
        )
        results = _run(launch, path, tmp_path)
    assert len(fork_server.spawned) - before == 2
    crash = results["crash"]
    assert crash.status == "error"
    assert "exited with code 3" in crash.reason, crash.reason
    assert crash.attempts[0].log_tail
    raises = results["raises"]
    assert raises.status == "error"
    # found in the log, not timed out: a boot timeout's reason names it and not the crash
    assert "crashed" in raises.reason and "boot timeout" not in raises.reason, raises.reason
    assert "entrypoint failed on purpose" in raises.reason


def test_spawns_the_server_cannot_honour_are_refused(fork_server: RecordingServer) -> None:
    env = agent_env(AgentLaunch(HOTEL / "agent.py"))

    async def spawn(env: dict[str, str], log: Path) -> None:
        ours, theirs = socket.socketpair()
        with ours, theirs:
            await fork_server.spawn(
                SpawnRequest(
                    agent=HOTEL / "agent.py",
                    env=env,
                    cwd=Path.cwd(),
                    log_path=log,
                    host_args=(
                        str(HOTEL / "agent.py"),
                        "--connect-addr",
                        "127.0.0.1:9",
                        "--control-fd",
                        str(theirs.fileno()),
                    ),
                    control_fd=theirs.fileno(),
                )
            )

    # an interpreter start-up setting a forked child could not take: refused before sending
    with pytest.raises(ForkServerError, match="PYTHONPATH"):
        asyncio.run(spawn({**env, "PYTHONPATH": "/somewhere/else"}, Path(os.devnull)))
    # refused by the server itself: its answer reaches the caller, and it carries on
    with pytest.raises(ForkServerError, match="No such file"):
        asyncio.run(spawn(env, Path("/nonexistent-dir/agent.log")))
    assert fork_server.alive


def test_forked_agents_collect_garbage_like_cold_ones(
    fork_server: RecordingServer, tmp_path: Path
) -> None:
    """The server pauses the garbage collector while it preloads (lkeval/startup.py says
    why); the agents it forks have it back on, with the preload frozen out of its passes."""
    mark, agent = tmp_path / "gc.json", tmp_path / "agent.py"
    agent.write_text(
        "import gc, json, os\n"
        "state = [gc.isenabled(), gc.get_freeze_count() > 0]\n"
        "open(os.environ['GC_MARK'], 'w').write(json.dumps(state))\n"
    )
    env = {**agent_env(AgentLaunch(agent)), "GC_MARK": str(mark)}

    async def spawn_and_wait(theirs: socket.socket) -> int:
        args = (str(agent), "--connect-addr", "127.0.0.1:9", "--control-fd")
        child = await fork_server.spawn(
            SpawnRequest(
                agent=agent,
                env=env,
                cwd=tmp_path,
                log_path=tmp_path / "agent.log",
                host_args=(*args, str(theirs.fileno())),
                control_fd=theirs.fileno(),
            )
        )
        deadline = time.monotonic() + 60
        while not (mark.exists() and mark.read_text()):
            assert time.monotonic() < deadline, (tmp_path / "agent.log").read_text()
            await asyncio.sleep(0.05)
        return child.pid

    ours, theirs = socket.socketpair()
    with ours, theirs:
        pid = asyncio.run(spawn_and_wait(theirs))
        with contextlib.suppress(ProcessLookupError):  # it may have given up on its own
            os.killpg(pid, signal.SIGKILL)
    assert json.loads(mark.read_text()) == [True, True]


def test_plugins_are_found_without_importing_the_agent(tmp_path: Path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(
        "import sys\nsys.exit('never imported')\n"
        "from livekit.plugins import silero, deepgram\n"
        "import livekit.plugins.cartesia.tts\n"
        "from livekit.plugins.turn_detector.multilingual import MultilingualModel\n"
    )
    assert agent_plugins(agent) == [
        "livekit.plugins.cartesia",
        "livekit.plugins.deepgram",
        "livekit.plugins.openai",
        "livekit.plugins.silero",
        "livekit.plugins.turn_detector",
    ]
    assert agent_plugins(tmp_path / "missing.py") == ["livekit.plugins.openai"]


def _read_event(stream: Any, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = stream.readline()
        if line:
            return dict(json.loads(line))
    raise AssertionError("no event from the fork server")


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" in status  # a zombie waiting for init is dead


@pytest.mark.e2e
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux")
def test_killing_the_fork_server_kills_its_children(tmp_path: Path) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(30)
    addr = f"127.0.0.1:{listener.getsockname()[1]}"
    dispatch = tmp_path / "dispatch.json"
    dispatch.write_text('{"simulationRunId": "r", "jobId": "j", "scenario": {"id": "x"}}')
    # the faulty agent's plain mode does not greet: no LLM call is cut off by the kill
    env = agent_env(
        AgentLaunch(
            TEST_AGENTS / "faulty_agent.py",
            env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "k"},
        )
    )
    fds_ours, fds_theirs = socket.socketpair()
    control_ours, control_theirs = socket.socketpair()
    server = subprocess.Popen(
        [sys.executable, str(SERVER_SCRIPT), "--fd-channel", str(fds_theirs.fileno())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
        pass_fds=(fds_theirs.fileno(),),
    )
    fds_theirs.close()
    try:
        assert _read_event(server.stdout)["event"] == "ready"
        assert server.stdin is not None
        socket.send_fds(fds_ours, [b"a"], [control_theirs.fileno()])
        control_theirs.close()
        server.stdin.write(
            json.dumps(
                {
                    "cmd": "spawn",
                    "id": "a",
                    "env": env,
                    "cwd": str(tmp_path),
                    "argv": [
                        str(TEST_AGENTS / "faulty_agent.py"),
                        "--connect-addr",
                        addr,
                        "--control-fd",
                        "9",
                    ],
                    "control_fd": 9,
                    "log": str(tmp_path / "agent.log"),
                }
            )
            + "\n"
        )
        server.stdin.flush()
        spawned = _read_event(server.stdout)
        assert spawned["event"] == "spawned", spawned
        pid = spawned["pid"]
        control_ours.sendall(json.dumps({"dispatch": dispatch.read_text()}).encode() + b"\n")
        said = b""  # the host says which inference class applies, then that it is prepared
        while not said.endswith(b'{"prepared": true}\n'):
            chunk = control_ours.recv(64)
            assert chunk, said
            said += chunk  # its job runs up to the session's start, waiting for go
        control_ours.sendall(b'{"go": true}\n')
        conn, _ = listener.accept()  # the child is up and dialled in
        assert os.getsid(pid) == pid and os.getpgid(pid) == pid  # its own session and group
        assert Path(f"/proc/{pid}/cwd").resolve() == tmp_path.resolve()
        server_pipes = {os.readlink(f"/proc/{server.pid}/fd/{fd}") for fd in (0, 1)}
        child_fds = set()
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                child_fds.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                continue
        assert not server_pipes & child_fds  # the server's pipes were not inherited
        assert os.readlink(f"/proc/{pid}/fd/9").startswith("socket:")  # its control channel
        assert os.readlink(f"/proc/{pid}/fd/1") == str(tmp_path / "agent.log")

        server.kill()
        server.wait()
        deadline = time.monotonic() + 5
        while not _gone(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(pid), "the child outlived its fork server"
        conn.close()
    finally:
        server.kill()
        listener.close()


@pytest.mark.e2e
def test_a_dead_fork_server_falls_back_to_cold_starts(tmp_path: Path, hotel_llm: LLMServer) -> None:
    launch0 = _hotel_launch(hotel_llm, None)
    server = ForkServer.start(sys.executable, agent_env(launch0), agent=HOTEL / "agent.py")
    os.kill(server.pid, signal.SIGKILL)
    # the client's reader sees the server's stdout close and records why it died: wait for
    # that record, not for ``alive``, which turns false as soon as the process is reaped (by
    # ``alive``'s own poll) while the reader, slower on a loaded machine, has not written it
    deadline = time.monotonic() + 60
    while server.dead_reason is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not server.alive and "SIGKILL" in (server.dead_reason or ""), server.dead_reason
    dispatch = tmp_path / "dispatch.json"
    dispatch.write_text('{"simulationRunId": "r", "jobId": "j", "scenario": {"id": "x"}}')
    agent = AgentProcess(_hotel_launch(hotel_llm, server), dispatch, tmp_path / "agent.log")

    async def boot_and_stop() -> int | None:
        conn = await agent.start(60)
        await conn.close()
        await agent.stop(5)
        return agent.proc.returncode if agent.proc else None

    assert asyncio.run(boot_and_stop()) == 0
    assert agent.started is not None and agent.started.mode == "cold"
    assert agent.started.why == "warm start failed: the fork server exited with signal SIGKILL"
    assert (
        "warm start failed: the fork server exited with signal SIGKILL"
        in (tmp_path / "agent.log").read_text()
    )
    server.close()


@pytest.mark.e2e
@pytest.mark.smoke
def test_warm_starts_work_or_say_why_on_this_livekit_agents(
    tmp_path: Path, hotel_llm: LLMServer
) -> None:
    """CI repeats this on the oldest supported livekit-agents: the fork server relies on
    private names, so on every version it must either work or decline with a reason."""
    launch = _hotel_launch(hotel_llm, None)
    starting = begin_launcher(sys.executable, agent_env(launch), agent=HOTEL / "agent.py")
    server, line = starting.result()
    if not isinstance(server, ForkServer):
        assert line.startswith("lk-eval: cold starts: warm starts unavailable: "), line
        assert "livekit-agents" in line or "fork" in line, line
        return
    try:
        assert line.startswith("lk-eval: warm starts: fork server ready in "), line
        assert not server.preloading and not starting.pending()  # taken: nothing to wait for
        results = _run(_hotel_launch(hotel_llm, server), HOTEL / "scenarios.yaml", tmp_path)
        assert results["SCN_checkDouble01"].status == "passed", results["SCN_checkDouble01"]
        assert results["SCN_bookAda01"].status == "passed", results["SCN_bookAda01"]
        assert "agent veto" in results["SCN_vetoGrace01"].reason
    finally:
        server.close()


def test_start_mode_is_per_attempt_and_old_results_still_load() -> None:
    def scenario(*modes: str) -> ScenarioResult:
        attempts = tuple(
            Attempt(status="passed", start_mode=m, cold_start_reason="" if m == "warm" else "x")
            for m in modes
        )
        return ScenarioResult("s", "S", "g", "G", "f.yaml", 1, "passed", attempts=attempts)

    assert run_start_mode([scenario("warm"), scenario("warm", "warm")]) == "warm"
    assert run_start_mode([scenario("warm"), scenario("cold")]) == "mixed"
    assert run_start_mode([scenario("cold")]) == "cold"
    assert run_start_mode([scenario()]) == ""  # nothing booted
    old_file = {  # written before start modes were per attempt
        "format_version": FORMAT_VERSION,
        "metadata": {
            "lkeval_version": "0",
            "livekit_agents_version": None,
            "agent": "a.py",
            "scenario_files": [],
            "started_at": "",
            "start_mode": "warm",
        },
        "scenarios": [
            {
                "scenario_id": "s",
                "label": "S",
                "group_id": "g",
                "group_name": "G",
                "file": "f.yaml",
                "line": 1,
                "status": "passed",
                "attempts": [{"status": "passed"}],
            }
        ],
    }
    loaded = results_from_dict(old_file)
    assert loaded.scenarios[0].attempts[0].start_mode == ""
    assert loaded.metadata.start_mode == "warm"


@pytest.mark.e2e
def test_forked_agents_with_livekit_turn_detection_never_build_its_local_model(
    tmp_path: Path, fork_server: RecordingServer
) -> None:
    # The fork server preloads without the local end-of-turn weights (~244 MB); an agent in
    # text mode must then not load them itself in every child (~0.25 CPU-s and ~108 MB each).
    path = tmp_path / "scenarios.yaml"
    scenarios = [
        {"id": kind, "label": kind, "userdata": {"turn_detection": kind}, "turns": turns}
        for kind in ("default", "mini")
        for turns in [
            [
                {"user": reply, "expect": [{"message": {"contains": "Fine"}}]}
                for reply in ("hello", "again")
            ]
        ]
    ]
    path.write_text(yaml.safe_dump({"name": "Turn detection", "scenarios": scenarios}))
    marks = tmp_path / "marks"
    marks.mkdir()
    before = len(fork_server.spawned)
    with LLMServer([{"model": "turn-agent", "text": "Fine."}]) as llm:
        launch = AgentLaunch(
            TEST_AGENTS / "turn_detector_agent.py",
            launcher=fork_server,
            env={
                "OPENAI_BASE_URL": llm.base_url,
                "OPENAI_API_KEY": "k",
                "TURN_DETECTOR_MARKS": str(marks),
            },
        )
        results = _run(launch, path, tmp_path)
    forked = fork_server.spawned[before:]
    assert len(forked) == 2
    assert {r.status for r in results.values()} == {"passed"}, results
    models = sorted(p.read_text() for p in marks.glob("*.model"))
    assert models == ["turn-detector-v1-mini"] * 2  # the local model is the one in use
    assert sorted(int(p.stem) for p in marks.glob("*.model")) == sorted(forked)
    assert list(marks.glob("*.eot")) == []


def test_the_fork_server_preloads_livekit_without_local_models_unless_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lkeval.host import fork_server

    seen: list[str | None] = []

    def imported(name: str) -> bool:  # what livekit's preload would read
        seen.append(os.environ.get(fork_server.LOCAL_INFERENCE_ENV))
        return True

    monkeypatch.setattr(fork_server, "_import", imported)
    monkeypatch.delenv(fork_server.LOCAL_INFERENCE_ENV, raising=False)
    fork_server._framework_preload()
    assert seen == ["0"] and fork_server.LOCAL_INFERENCE_ENV not in os.environ
    monkeypatch.setenv(fork_server.LOCAL_INFERENCE_ENV, "1")  # the agent's environment asks
    fork_server._framework_preload()
    assert seen == ["0", "1"] and os.environ[fork_server.LOCAL_INFERENCE_ENV] == "1"
