"""Replaying with no keys (issue 22.8 and 22.9), through the real CLI, the Action's entrypoint
and real agent processes.

One recording with keys and every server up (module-scoped: the tests below only read it), on
another interpreter (``--python``: a venv in which lk-eval and its own dependencies cannot be
imported, as in a user's project venv): a scripted scenario that passes, one that fails (the
agent checks a suite, the scenario expects a double), and a simulated one (caller and judge).
Then, with every LLM and tool server stopped and no key of any kind in the environment:

- a laptop reproducing the CI failure: ``--cassette-mode replay`` gives the same transcripts,
  checks, verdicts and exit code;
- a fork's pull request (its GitHub event, the secret arriving empty) that changed one scenario:
  the unchanged one is evaluated from the cassettes, the changed one is "not run: needs a live
  LLM (no credentials)", the gate fails whatever ``--fail-on`` says, and the report says what
  share was evaluated; the same through ``entrypoint.py`` as the container runs it, with the
  cassettes restored from the default branch's artifact (``cassettes-from: auto``).
"""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import clean_env, read_json
from github_server import FakeGitHub, github_server
from replay_agent import (
    SCENARIOS,
    Rooms,
    conversation,
    pull_request_env,
    replay_agent,
    run_entrypoint,
    run_with_cassettes,
    servers,
)

from lkeval.results.model import NOT_RUN_NO_LLM

pytestmark = pytest.mark.e2e

FAILS = """\
  - id: suite-for-one
    label: Checks a suite for one night
    instructions: You want to know whether a suite is free for one night.
    agent_expectations: The agent checks availability and tells the guest.
    turns:
      - user: Is a suite free for one night?
        expect:
          - function_call: {name: check_availability, arguments: {room_type: double, nights: 1}}
"""
#: The fork's change: one scripted scenario's user line (its agent's request differs).
CHANGED = ("Is a double room free for two nights?", "Is a double room free for two nights, please?")
REPO = "octo/agent"
HOSTED = "https://llm.example"
PR = 9
#: Importing any of these in the agent's interpreter fails: lk-eval and what only it needs.
BLOCKED = ("lkeval", "lkeval_action", "yaml", "junit_xml", "genai_prices")
SITECUSTOMIZE = """\
import os, sys

class _NotInThisVenv:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not in this venv)", name=name)
        return None

sys.meta_path.insert(0, _NotInThisVenv())
with open({mark!r}, "a") as fh:
    fh.write(f"{{os.getpid()}}\\n")
"""


@dataclass(frozen=True)
class Recording:
    """The recorded run: where everything is, what it gave, and the environment's URLs."""

    root: Path
    agent: Path
    cassettes: Path
    proc: Any
    results: Any
    urls: dict[str, str]
    python: Path
    mark: Path


def _other_python(directory: Path) -> tuple[Path, Path]:
    """An interpreter in which lk-eval and its own dependencies cannot be imported (a project
    venv with livekit-agents and nothing of lk-eval's), and the file each of its processes
    writes its pid to."""
    site, mark = directory / "site", directory / "other-python.pids"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE.format(blocked=BLOCKED, mark=str(mark)))
    python = directory / "python"
    python.write_text(
        f'#!/bin/sh\nPYTHONPATH={site}${{PYTHONPATH:+:$PYTHONPATH}} exec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    return python, mark


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recording]:
    root = tmp_path_factory.mktemp("recorded")
    (root / "scenarios.yaml").write_text(SCENARIOS + FAILS, encoding="utf-8")
    agent = replay_agent(root)
    python, mark = _other_python(root)
    Rooms.asked.clear()
    with servers() as (llm, rooms):
        urls = {
            "OPENAI_BASE_URL": llm.base_url,
            "LKEVAL_CALLER_BASE_URL": llm.base_url,
            "LKEVAL_JUDGE_BASE_URL": llm.base_url,
            "ROOMS_URL": f"http://127.0.0.1:{rooms.server_address[1]}/rooms",
            "HOTEL_AGENT_MODEL": "hotel-agent",
        }
        env = clean_env(OPENAI_API_KEY="test-key-not-secret", **urls)
        flags = ("--cassette-mode", "record", "--python", str(python))
        proc, results = run_with_cassettes(root, agent, env, "record", *flags)
        assert Rooms.asked, "the tool really asked the rooms server"
    yield Recording(root, agent, root / "cassettes", proc, results, urls, python, mark)


def _keyless(env: dict[str, str]) -> dict[str, str]:
    """``env`` with no variable that looks like a credential (none set, not even empty)."""
    keyless = {k: v for k, v in env.items() if not re.search("KEY|SECRET|TOKEN", k, re.I)}
    assert not [k for k in keyless if k.startswith(("OPENAI_API", "LIVEKIT_API"))]
    return keyless


def test_the_recording_ran_on_an_interpreter_without_lk_eval(recording: Recording) -> None:
    """Record mode through another interpreter: every client path of the agent (the OpenAI
    SDK's httpx, livekit's, the tool's aiohttp) recorded with lk-eval not importable there."""
    assert recording.proc.returncode == 1, recording.proc.stdout + recording.proc.stderr
    statuses = {s["scenario_id"]: s["status"] for s in recording.results["scenarios"]}
    assert statuses == {
        "check-double": "passed",
        "talk-and-book": "passed",
        "suite-for-one": "failed",
    }
    assert recording.mark.read_text().split(), "the agents ran on the other interpreter"
    agent = read_json(recording.cassettes / "check-double.json")["exchanges"]["agent"]
    urls = [c["request"]["url"] for c in agent]
    assert any(u.endswith("/chat/completions") for u in urls), urls
    assert any("/rooms?" in u for u in urls), "the tool's aiohttp call was recorded"
    for path in recording.cassettes.iterdir():
        assert "test-key-not-secret" not in path.read_text(), f"the key reached {path.name}"


def test_keyless_replay_reproduces_a_ci_failure_exactly(
    recording: Recording, tmp_path: Path
) -> None:
    """docs/action.md's local recipe: the CI run's cassettes, no key at all, no server up."""
    shutil.copytree(recording.cassettes, tmp_path / "cassettes")
    shutil.copy(recording.root / "scenarios.yaml", tmp_path / "scenarios.yaml")
    env = _keyless(clean_env(**recording.urls))
    before = len(recording.mark.read_text().split())
    flags = ("--cassette-mode", "replay", "--python", str(recording.python))
    proc, results = run_with_cassettes(tmp_path, recording.agent, env, "replay", *flags)
    assert proc.returncode == recording.proc.returncode == 1, proc.stdout + proc.stderr
    assert conversation(results) == conversation(recording.results)
    assert {s["scenario_id"]: s["status"] for s in results["scenarios"]} == {
        "check-double": "passed",
        "talk-and-book": "passed",
        "suite-for-one": "failed",
    }
    for scenario in results["scenarios"]:
        (attempt,) = scenario["attempts"]
        assert attempt["replay"]["mode"] == "replayed", attempt["replay"]
        assert attempt["replay"]["calls_live"] == 0
    assert len(recording.mark.read_text().split()) > before, "replayed on the other interpreter"
    cassettes = sorted(p.read_bytes() for p in (tmp_path / "cassettes").iterdir())
    assert cassettes == sorted(p.read_bytes() for p in recording.cassettes.iterdir())


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (
            ["--judge-model", "judge-2"],
            "recorded with judge model 'judge', this run uses 'judge-2'",
        ),
        (["--caller-model", "c-2"], "recorded with caller model 'caller', this run uses 'c-2'"),
        (
            ["--cassette-rules", "rules.json"],
            "recorded with cassette rules '(none)', this run uses",
        ),
    ],
    ids=["judge-model", "caller-model", "rules"],
)
def test_a_cassette_recorded_with_another_identity_is_refused_saying_why(
    recording: Recording, tmp_path: Path, flags: list[str], reason: str
) -> None:
    """Another judge or caller model, or other scrub rules (a wider rule could make a changed
    request match a stale recording): nothing is replayed, the run stops before any agent
    boots (the judge preflight's cassette is refused first), and the reason is given.

    Cold starts: a warm run would preload a fork server meanwhile (~4 s of CPU per run) only
    to stop it, which test_signal_before_the_engine.py's failed-preflight test checks."""
    shutil.copytree(recording.cassettes, tmp_path / "cassettes")
    shutil.copy(recording.root / "scenarios.yaml", tmp_path / "scenarios.yaml")
    (tmp_path / "rules.json").write_text(json.dumps({"ignore_patterns": ["Is a \\w+ room"]}))
    env = _keyless(clean_env(**recording.urls))
    proc, results = run_with_cassettes(
        tmp_path,
        recording.agent,
        env,
        "refused",
        "--cassette-mode",
        "replay",
        "--cold-start",
        *flags,
    )
    assert proc.returncode == 2 and results is None, proc.stdout + proc.stderr
    assert f"replay miss at judge's call 1: {reason}" in proc.stdout + proc.stderr


def _fork_scenarios(directory: Path) -> Path:
    """The fork's scenarios: the failing one left out, one scripted scenario's line changed."""
    assert CHANGED[0] in SCENARIOS
    path = directory / "scenarios.yaml"
    path.write_text(SCENARIOS.replace(*CHANGED), encoding="utf-8")
    return path


def _fork_env(directory: Path, gh: FakeGitHub, urls: dict[str, str], **more: str) -> dict[str, str]:
    """A fork's pull_request run: its event and a read-only token, no key."""
    env = _keyless(clean_env(**urls))
    env.update(pull_request_env(directory, gh.base_url, gh.token, REPO, PR, "mallory/agent"))
    env.update(more)
    return env


def _hosted(recording: Recording, directory: Path) -> dict[str, str]:
    """The recording's cassettes in ``directory`` as if recorded against a hosted LLM (a host
    that needs a key, never contacted: replay answers every call), and the URLs that say so."""
    local = recording.urls["OPENAI_BASE_URL"].removesuffix("/v1")
    directory.mkdir()
    for path in recording.cassettes.iterdir():
        if path.name == "_manifest.json":  # digests, no URL
            continue
        text = path.read_text(encoding="utf-8")
        assert local in text
        (directory / path.name).write_text(text.replace(local, HOSTED), encoding="utf-8")
    hosted = f"{HOSTED}/v1"
    return {
        **recording.urls,
        "OPENAI_BASE_URL": hosted,
        "LKEVAL_CALLER_BASE_URL": hosted,
        "LKEVAL_JUDGE_BASE_URL": hosted,
    }


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    with github_server() as server:
        yield server


def _assert_fork_outcome(recording: Recording, results: Any, summary: str, out: str) -> None:
    """The unchanged scenario evaluated, the changed one not run (naming the call it needed:
    the first that carries the changed line), the gate failed saying what share was
    evaluated, and nothing went live."""
    calls = read_json(recording.cassettes / "check-double.json")["exchanges"]["agent"]
    changed_call = next(c["call"] for c in calls if CHANGED[0] in json.dumps(c["request"]))
    by_id = {s["scenario_id"]: s for s in results["scenarios"]}
    assert set(by_id) == {"check-double", "talk-and-book"}
    assert results["metadata"]["no_credentials"] is True
    same = by_id["talk-and-book"]
    assert same["status"] == "passed", same
    assert same["attempts"][0]["replay"]["mode"] == "replayed"
    assert same["attempts"][0]["verdicts"], "its recorded verdict was replayed"
    changed = by_id["check-double"]
    assert changed["status"] == "error", changed
    head = f"{NOT_RUN_NO_LLM}: replay miss at the agent's call {changed_call}: "
    assert changed["reason"].startswith(head + "body.messages["), changed["reason"]
    assert 'sent "Is a double room free for two nights, please?"' in changed["reason"]
    for attempt in (a for s in results["scenarios"] for a in s["attempts"]):
        assert attempt["replay"]["calls_live"] == 0, attempt["replay"]
    share = "not every scenario could be evaluated: 1 of 2 (50.0%) evaluated from cassettes"
    assert share in summary, summary
    assert "::notice title=lk-eval%3A replaying a fork's pull request::" in out


def test_a_fork_pr_evaluates_what_replays_and_never_passes_the_rest(
    recording: Recording, tmp_path: Path, gh: FakeGitHub
) -> None:
    """The workflow passes no key at all; the caller and judge are hosted, so lk-eval finds
    them without credentials and, on a fork's PR with cassettes, replays them."""
    scenarios = _fork_scenarios(tmp_path)
    env = _fork_env(tmp_path, gh, _hosted(recording, tmp_path / "cassettes"))
    before = {p.name: p.read_text() for p in (tmp_path / "cassettes").iterdir()}
    flags = ("--cassette-mode", "auto", "--fail-on", "never", "--comment", "off")
    proc, results = run_with_cassettes(
        tmp_path, recording.agent, env, "fork", *flags, scenarios=scenarios, github=True
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out  # the gate failed, whatever --fail-on says
    _assert_fork_outcome(recording, results, (tmp_path / "summary.md").read_text(), proc.stdout)
    assert "gate=fail\n" in (tmp_path / "output.txt").read_text()
    after = {p.name: p.read_text() for p in (tmp_path / "cassettes").iterdir()}
    assert after == before, "a fork's replay rewrites no cassette"


def _cassettes_zip(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(directory.iterdir()):
            archive.writestr(path.name, path.read_bytes())
    return buffer.getvalue()


def test_a_fork_pr_through_the_actions_entrypoint_with_mains_cassettes(
    recording: Recording, tmp_path: Path, gh: FakeGitHub
) -> None:
    """As the container runs it: inputs, ``cassettes-from: auto`` restoring main's artifact
    (the recipe of docs/action.md), a fork's event, the secret arriving empty. The caller and
    judge are self-hosted (no key needed), but the agent's key is empty too: replayed."""
    gh.add_run(artifacts={"lk-eval-cassettes": _cassettes_zip(recording.cassettes)}, repo=REPO)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    shutil.copy(recording.agent, workspace / "agent.py")
    _fork_scenarios(workspace)
    env = _fork_env(tmp_path, gh, recording.urls, OPENAI_API_KEY="")  # `${{ secrets.X }}`
    proc = run_entrypoint(workspace, env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "cassettes: main run #1 (commit " in out and "restored (4 in its manifest)" in out, out
    # what replayed in full is copied from the artifact (a fork's replay records nothing)
    assert sorted(p.name for p in (workspace / "lkeval-cassettes").iterdir()) == [
        "_preflight.json",
        "talk-and-book.json",
    ]
    results = read_json(workspace / "lkeval-results" / "results.json")
    _assert_fork_outcome(recording, results, (tmp_path / "summary.md").read_text(), proc.stdout)
