"""``lkeval run`` starts its fork server in its first lines (lkeval/run/early_start.py, issue
20.4), and a run that stops before it needs one leaves nothing: bad flags, bad scenarios, an
empty shard, a failed judge preflight. ``--cold-start``, ``--help``, an empty shard and the
other commands start none. The run takes the server it started (never a second one) because
its own launch equals what argv was read as: checked here against the real parser.

Through the real command (``python -m lkeval``) with a stand-in interpreter that notes each
fork server it is asked to start and then only sleeps; its own TMPDIR shows what is left.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import alive, clean_env

from lkeval.cli import build_parser
from lkeval.cli.options import run_options
from lkeval.cli.run import _collaborators, suite_settings
from lkeval.run.early_start import launch_key
from lkeval.run.suite import Suite
from lkeval.testing.llm_server import LLMServer

JUDGE = "early-judge"
SCENARIOS = (
    "scenarios:\n  - label: hi\n    turns:\n      - user: hi\n"
    "        expect:\n          - message: {contains: x}\n"
    "    agent_expectations: says hi\n"
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX")


class World:
    """The stand-in python, an agent file, scenario files and a private TMPDIR."""

    def __init__(self, tmp_path: Path, on_start: str = "") -> None:
        """``on_start``: a shell command the fork server runs first (``$PPID`` is lk-eval)."""
        self.tmp = tmp_path / "tmp"
        self.tmp.mkdir()
        self.mark = tmp_path / "servers"
        self.python = tmp_path / "python"
        self.python.write_text(
            "#!/bin/sh\n"
            f'case "$*" in *fork_server.py*) echo $$ >> "{self.mark}"; {on_start}\n'
            "  exec sleep 600;; esac\n"
            f'exec {sys.executable} "$@"\n'
        )
        self.python.chmod(0o755)
        self.agent = tmp_path / "agent.py"
        self.agent.write_text("from livekit.plugins import openai\n")
        self.scenarios = tmp_path / "s.yaml"
        self.scenarios.write_text(SCENARIOS)
        self.results = tmp_path / "out" / "results.json"

    def argv(self, *more: str) -> list[str]:
        return [
            "run", "--agent", str(self.agent), "--scenarios", str(self.scenarios),
            "--results", str(self.results), "--python", str(self.python), *more,
        ]  # fmt: skip

    def lkeval(self, argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "lkeval", *argv],
            capture_output=True,
            text=True,
            env=clean_env(TMPDIR=str(self.tmp), **env),
            timeout=120,
        )

    def servers(self) -> list[int]:
        return [int(p) for p in self.mark.read_text().split()] if self.mark.exists() else []

    def left_nothing(self) -> None:
        assert not alive(self.servers()), "a fork server outlived lk-eval"
        assert list(self.tmp.iterdir()) == [], "raw logs left in TMPDIR"


@pytest.mark.parametrize(
    ("more", "error"),
    [
        (["--concurrency", "nope"], "--concurrency"),
        (["--bogus-flag"], "unrecognized arguments: --bogus-flag"),
        (["--scenarios", "MISSING"], "MISSING"),
    ],
    ids=["bad value", "unknown flag", "missing scenarios"],
)
def test_bad_input_is_exit_2_and_the_early_server_is_gone(
    tmp_path: Path, more: list[str], error: str
) -> None:
    world = World(tmp_path)
    proc = world.lkeval(world.argv(*more))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert error in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert len(world.servers()) == 1  # it had started before lk-eval's imports
    world.left_nothing()


def test_bad_scenarios_are_exit_2_naming_the_line_and_the_server_is_gone(tmp_path: Path) -> None:
    world = World(tmp_path)
    world.scenarios.write_text("scenarios:\n  - label: hi\n    turns: 3\n")
    proc = world.lkeval(world.argv())
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("lk-eval: 1 error(s) in scenario files"), proc.stderr
    assert f"{world.scenarios}:3:12: error: scenarios[0].turns" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(world.servers()) == 1
    world.left_nothing()


@pytest.mark.parametrize(
    "argv",
    [
        ["--cold-start", "--scenarios", "MISSING"],  # exit 2 at the scenarios: none before
        ["--shard", "2/2"],  # one scenario, two shards: this one is empty
        ["--help"],
    ],
    ids=["cold start", "empty shard", "help"],
)
def test_no_fork_server_where_none_is_wanted(tmp_path: Path, argv: list[str]) -> None:
    world = World(tmp_path)
    proc = world.lkeval(world.argv(*argv))
    assert proc.returncode in (0, 2), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert world.servers() == []
    world.left_nothing()


def test_the_empty_shard_passes_without_a_server(tmp_path: Path) -> None:
    world = World(tmp_path)
    proc = world.lkeval(world.argv("--shard", "2/2"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert world.results.exists() and world.servers() == []


@pytest.mark.parametrize("command", ["validate", "merge", "calibrate"])
def test_other_commands_start_none(tmp_path: Path, command: str) -> None:
    world = World(tmp_path)
    argv = world.argv()
    argv[0] = command
    world.lkeval(argv)  # their own usage errors: not this test's business
    assert world.servers() == []
    world.left_nothing()


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_signal_while_lkeval_imports_reports_every_scenario_not_run(
    tmp_path: Path, how: signal.Signals
) -> None:
    """The fork server signals lk-eval as soon as it is started, long before lk-eval has
    imported its command line: the run still loads its scenarios, writes every one "not run
    (interrupted)" with its reports, exits 128+N, and stops the server."""
    world = World(tmp_path, on_start=f"kill -{how.name.removeprefix('SIG')} $PPID;")
    junit = tmp_path / "out" / "junit.xml"
    proc = world.lkeval(world.argv("--junit", str(junit)))
    assert proc.returncode == 128 + how, proc.stdout + proc.stderr
    assert "partial results written" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    data = json.loads(world.results.read_text())
    assert data["metadata"]["interrupted"] is True
    assert [s["reason"] for s in data["scenarios"]] == ["not run (interrupted)"]
    assert junit.exists()
    assert len(world.servers()) == 1
    world.left_nothing()


def test_a_failed_preflight_stops_the_one_server_started(tmp_path: Path) -> None:
    """The run takes the server started before its imports (the mark holds one pid, not two)
    and a judge that cannot answer stops it: nothing booted, nothing left."""
    world = World(tmp_path)
    with LLMServer([{"model": JUDGE, "status": 401}]) as llm:
        started = time.monotonic()
        proc = world.lkeval(
            world.argv("--judge-model", JUDGE, "--repeat", "1"),
            OPENAI_BASE_URL=llm.base_url,
            OPENAI_API_KEY="k",
            LKEVAL_LLM_RETRIES="0",
        )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "judge preflight" in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "warm starts" not in proc.stdout and "[1/1]" not in proc.stdout
    assert len(world.servers()) == 1, "the run started a second fork server"
    assert time.monotonic() - started < 120
    assert not world.results.exists()
    world.left_nothing()


@pytest.mark.parametrize(
    "more",
    [
        [],
        ["--env", "A=1", "--env=B=2", "--env", "A=3", "--inference-class", "agent"],
        ["--concurrency", "2", "--match", "hi", "--tag", "t=x", "--env", "EMPTY="],
        ["--cassettes", "tapes", "--cassette-mode", "auto"],
    ],
    ids=["plain", "env and class", "other flags", "recording"],
)
def test_the_run_asks_for_the_server_argv_was_read_as(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, more: list[str]
) -> None:
    for name in ("GITHUB_ACTIONS", "GITHUB_TOKEN", "LKEVAL_JUDGE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_withheld")
    monkeypatch.setenv("INPUT_AGENT", "an action input")
    world = World(tmp_path)
    argv = world.argv(*more)
    options = run_options(build_parser().parse_args(argv))
    suite = Suite(suite_settings(options), _collaborators(options, sys.stdout), sys.stdout)
    key = launch_key(argv)
    assert key is not None and key == suite.launch_key()
    env = dict(key.env)
    assert "GITHUB_TOKEN" not in env and "INPUT_AGENT" not in env  # withheld from the agent
