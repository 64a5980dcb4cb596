"""A run of lk-eval held in one phase, then signalled (issue 19.4, 19.5): the shared half of
tests/e2e/test_signal_before_the_engine.py and tests/e2e/test_signal_in_the_engine.py.

Each phase is held open by the world around lk-eval, never by a sleep in the test: the judge
model does not answer (preflight, judging), the interpreter that would become the fork server
waits before it starts (fork-server), the agent never finishes importing (boot) or never
answers the first turn (conversation), GitHub does not answer the PR comment (writing). The
test signals lk-eval once the phase is reached, and every time: exit 130/143, the results file
and JUnit written, nothing of lk-eval's left running or in TMPDIR.

Two modules, not one, so that pytest-xdist (``--dist loadfile``) runs the two halves on two
workers: each case is a whole lk-eval run.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import yaml
from conftest import TEST_AGENTS, alive, clean_env, lkeval_process, run_argv
from github_server import github_server

from lkeval.testing.llm_server import LLMServer

HELD = TEST_AGENTS / "held_agent.py"
JUDGE = "held-judge"
BEFORE_THE_ENGINE = ("preflight", "fork-server")
IN_THE_ENGINE = ("boot", "conversation", "judging", "stopping", "writing")
SIGNALS = [signal.SIGINT, signal.SIGTERM]
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


def held_scenarios(tmp_path: Path) -> Path:
    path = tmp_path / "held.yaml"
    scenario = {
        "id": "held1",
        "label": "Held one",
        "agent_expectations": "The agent repeats what the caller says.",
        "turns": [{"user": "hello", "expect": [{"message": {}}]}],
    }
    path.write_text(yaml.safe_dump({"name": "Held", "scenarios": [scenario]}))
    return path


def fork_server_python(tmp_path: Path, mark_env: str, *, hold: bool = False) -> Path:
    """An interpreter that notes its pid in ``$<mark_env>`` when it is started as the fork
    server; with ``hold``, it then waits (600 s) before it becomes one."""
    wait = " sleep 600;" if hold else ""
    wrapper = tmp_path / "python"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'case "$*" in *fork_server.py*) echo $$ > "${mark_env}";{wait}; esac\n'
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
    if phase in ("fork-server", "boot", "conversation", "stopping"):
        return mark.exists() and mark.read_text().strip() != ""
    if phase == "writing":
        return bool(gh.requests)
    judged = [json.dumps(r.body) for r in llm.requests if r.body.get("model") == JUDGE]
    if phase == "preflight":
        return bool(judged)
    return any("You said" in body for body in judged)


def signal_in_phase(tmp_path: Path, phase: str, how: signal.Signals) -> None:
    """Run lk-eval until it reaches ``phase``, send it ``how``, and check what it leaves."""
    tmpdir, mark = tmp_path / "tmp", tmp_path / "held.mark"
    tmpdir.mkdir()
    results, junit = tmp_path / "out" / "results.json", tmp_path / "out" / "junit.xml"
    argv = [*run_argv(HELD, held_scenarios(tmp_path), results), "--junit", str(junit)]
    argv += ["--judge-model", JUDGE, "--concurrency", "1"]
    if phase == "fork-server":
        argv += ["--python", str(fork_server_python(tmp_path, "HOLD_MARK", hold=True))]
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
        with lkeval_process(argv, env) as cli:
            deadline = time.monotonic() + 180
            while not _in_phase(phase, mark, llm, gh):
                assert cli.poll() is None, cli.communicate()
                assert time.monotonic() < deadline, f"lk-eval never reached {phase}"
                time.sleep(0.05)
            started = {p.pid for p in psutil.Process(cli.pid).children(recursive=True)}
            cli.send_signal(how)
            out, err = cli.communicate(timeout=90)
    assert cli.returncode == 128 + how, out + err
    assert "partial results written" in err, out + err
    assert "Traceback" not in out + err, out + err
    data = json.loads(results.read_text())
    (scenario,) = data["scenarios"]
    if phase == "writing":  # the results were complete when GitHub held the comment
        assert scenario["status"] == "passed", scenario
    else:
        assert data["metadata"]["interrupted"] is True
        assert scenario["status"] != "passed", scenario
    if phase == "stopping":  # decided before its agent stopped: the verdict is not lost
        assert [a["status"] for a in scenario["attempts"]] == ["passed"], scenario
    if phase in BEFORE_THE_ENGINE:
        assert scenario["reason"] == "not run (interrupted)", scenario
    assert "Held one" in junit.read_text()
    assert not alive(started), "still alive when lk-eval had exited"
    assert list(tmpdir.iterdir()) == [], "temp files left behind"
