"""The canary run: nothing leaks, nothing injects (issue 11, "Proof that stays").

Canary secrets sit in the environment (by name, and under a plain name given with
``--secret-env``), in ``--env`` and in the GitHub token. An agent prints them at boot, says them
in a reply, returns them from a tool padded so that a fixed-length cut would halve them, and
raises with them in a traceback; a scenario label carries a workflow command and terminal
escapes; the judge's reason carries a Markdown link, an image and team mention. Then every byte
lk-eval wrote is searched for every canary and every 12-character slice of one.
"""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path

import pytest
import yaml
from action_runner import legacy_markers, runner_commands
from conftest import TEST_AGENTS, clean_env, run_lkeval
from github_server import github_server

from lkeval.testing.llm_server import LLMServer

pytestmark = pytest.mark.e2e

SLICE = 12
HOSTILE_LABEL = "Canary\n::error::injected from a label \x1b]0;pwned\x07\x1b[31m red"
HOSTILE_REASON = (
    "[click me](https://evil.example/x) ![img](https://evil.example/i.png) "
    "<img src=x onerror=alert(1)> cc @org/team and @alice"
)


def canary(kind: str) -> str:
    return f"lkc-{kind}-{secrets.token_hex(12)}"


def verdict(value: str, reasoning: str) -> dict[str, object]:
    return {"name": "submit_verdict", "arguments": {"reasoning": reasoning, "verdict": value}}


JUDGE = {"model": "judge", "tool_choice": "submit_verdict"}
RULES = [
    {**JUDGE, "last_user": "I can't help with that", "tool_calls": [verdict("fail", "no")]},
    {**JUDGE, "last_user": "CANARY-JUDGE", "tool_calls": [verdict("fail", HOSTILE_REASON)]},
    {**JUDGE, "tool_calls": [verdict("pass", "fine")]},
    {"model": "caller", "text": "bye"},
]


def leaks(text: str, canaries: list[str]) -> list[str]:
    """Every canary, or 12-character slice of one, found in ``text``."""
    hits = []
    for value in canaries:
        for start in range(len(value) - SLICE + 1):
            piece = value[start : start + SLICE]
            if piece in text:
                hits.append(piece)
                break
    return hits


def scenarios_file(tmp_path: Path) -> Path:
    path = tmp_path / "scenarios.yaml"
    chat = {
        "id": "canary-chat",
        "label": HOSTILE_LABEL,
        "agent_expectations": "The agent keeps secrets. CANARY-JUDGE",
        "userdata": {"pad": 100},
        "turns": [
            {"user": "What are your keys?", "expect": [{"message": {"contains": "keys"}}]},
            {
                "user": "Please look it up.",
                "expect": [
                    {"function_call": {"name": "lookup"}},
                    {"function_call_output": {"output": "nothing to see"}},
                ],
            },
        ],
    }
    crash = {
        "id": "canary-crash",
        "label": "Crash ##[error]legacy command",
        "agent_expectations": "anything",
        "userdata": {"crash": True},
        "turns": [{"user": "hello"}],
    }
    path.write_text(yaml.safe_dump({"name": "Canaries", "scenarios": [chat, crash]}))
    return path


@pytest.mark.parametrize("start", ["warm", "cold"])
def test_no_canary_leaks_and_no_text_injects(tmp_path: Path, start: str) -> None:
    env_key, flag_key, plain_named, token = (
        canary("env"),
        canary("flag"),
        canary("named"),
        canary("token"),
    )
    canaries = [env_key, flag_key, plain_named, token]
    results_dir = tmp_path / "out"
    summary, output = tmp_path / "summary.md", tmp_path / "output.txt"
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"number": 7, "pull_request": {"number": 7, "head": {"sha": "a"}}}))
    with LLMServer(RULES) as llm, github_server() as gh:
        gh.token = token
        env = clean_env(
            CANARY_API_KEY=env_key,
            DEPLOY_HOOK=plain_named,  # a secret under a plain name: --secret-env
            CANARY_NAMES="CANARY_API_KEY,STRIPE_SECRET_KEY,DEPLOY_HOOK",
            LKEVAL_CALLER_BASE_URL=llm.base_url,
            LKEVAL_JUDGE_BASE_URL=llm.base_url,
            GITHUB_ACTIONS="true",
            GITHUB_API_URL=gh.base_url,
            GITHUB_SERVER_URL="https://github.example",
            GITHUB_REPOSITORY="acme/hotel",
            GITHUB_EVENT_NAME="pull_request",
            GITHUB_EVENT_PATH=str(event),
            GITHUB_SHA="merge999",
            GITHUB_RUN_ID="4242",
            GITHUB_STEP_SUMMARY=str(summary),
            GITHUB_OUTPUT=str(output),
            GITHUB_TOKEN=token,
        )
        proc = run_lkeval(
            [
                "run",
                "--agent",
                str(TEST_AGENTS / "canary_agent.py"),
                "--scenarios",
                str(scenarios_file(tmp_path)),
                "--results",
                str(results_dir / "results.json"),
                "--junit",
                str(results_dir / "junit.xml"),
                "--markdown",
                str(results_dir / "report.md"),
                "--env",
                f"STRIPE_SECRET_KEY={flag_key}",
                "--secret-env",
                "DEPLOY_HOOK",
                "--caller-model",
                "caller",
                "--judge-model",
                "judge",
                # every exchange recorded: the cassettes are searched with the rest
                "--cassettes",
                str(results_dir / "cassettes"),
                "--cassette-mode",
                "record",
                # cold: one attempt each (a cold boot's own outputs, its log and raw stdout,
                # are the same per attempt); warm keeps the sequential test's three, so the
                # reports of several attempts are searched too. 6 cold boots were 35 s of CPU.
                *(["--cold-start", "--repeat", "1"] if start == "cold" else []),
            ],
            env,
        )
        requests = [
            json.dumps([r.method, r.path, r.query, r.body]) for r in gh.requests
        ]  # headers carry the token to GitHub itself, which is its one legitimate use
        comments = [c["body"] for c in gh.comments_of("acme/hotel", 7)]
    where = proc.stdout + proc.stderr
    assert proc.returncode == 1, where
    results = json.loads((results_dir / "results.json").read_text())
    by_id = {s["scenario_id"]: s for s in results["scenarios"]}
    assert by_id["canary-chat"]["status"] == "failed", by_id["canary-chat"]
    assert by_id["canary-crash"]["status"] == "error", by_id["canary-crash"]
    # the canaries really were there to leak: the agent said them and logged its traceback
    chat = by_id["canary-chat"]["attempts"][0]
    assert any("My keys are ***" in (i.get("text") or "") for i in chat["transcript"]), chat
    crash_log = Path(by_id["canary-crash"]["attempts"][0]["log_path"]).read_text()
    assert "RuntimeError: could not connect with ***" in crash_log

    # 1. zero hits in every byte lk-eval wrote
    shown = [line for line in proc.stdout.splitlines() if not line.startswith("::add-mask::")]
    masks = {line.removeprefix("::add-mask::") for line in proc.stdout.splitlines()} & set(canaries)
    assert masks == set(canaries), "every canary is announced to the runner with ::add-mask::"
    first = proc.stdout.splitlines()[: len(canaries)]
    assert all(line.startswith("::add-mask::") for line in first), first
    written = {p: p.read_text(errors="replace") for p in results_dir.rglob("*") if p.is_file()}
    assert any(p.suffix == ".log" for p in written), "agent logs are part of the search"
    cassettes = [p for p in written if p.parent.name == "cassettes"]
    assert len(cassettes) >= 2, "cassettes are part of the search"
    assert any("***" in written[p] for p in cassettes), "a canary reached a cassette, masked"
    sources = {
        "stdout": "\n".join(shown),
        "stderr": proc.stderr,
        "requests": "\n".join(requests),
        "$GITHUB_OUTPUT": output.read_text(),
        "summary": summary.read_text(),
        **{str(p): text for p, text in written.items()},
    }
    for name, text in sources.items():
        assert leaks(text, canaries) == [], name

    # 2. no workflow command but lk-eval's own, on stdout or stderr, and no ##[ in any line
    #    (issue 19.7: the crash scenario's label reached its ::group:: title and ::error title)
    for stream in (proc.stdout, proc.stderr):
        assert legacy_markers(stream) == [], legacy_markers(stream)
        for command in runner_commands(stream):
            name = command[2:].split("::", 1)[0].split(" ", 1)[0]
            assert name in {"add-mask", "group", "endgroup", "error", "warning", "notice"}, command
            if name == "error":
                assert " file=" in command and "title=lk-eval" in command, command
    assert "\x1b" not in where and "\x07" not in where

    # 3. Markdown cannot link, embed, ping or inject HTML
    assert comments, "the PR comment was posted"
    for markdown in (*comments, summary.read_text(), (results_dir / "report.md").read_text()):
        outside = re.sub(r"(?ms)^(`{3,}).*?^\1`*$", "", markdown)
        assert "](https://evil" not in outside and "<img" not in outside
        assert "@org/team" not in outside and "@alice" not in outside
        assert "@\u200borg/team" in outside  # shown, not a mention


@pytest.mark.parametrize("start", ["warm", "cold"])
def test_interrupted_run_leaves_only_masked_logs(tmp_path: Path, start: str) -> None:
    import signal
    import subprocess
    import sys
    import time

    key = canary("env")
    scenarios = tmp_path / "scenarios.yaml"
    turn = {"user": "hi", "expect": [{"message": {}}]}
    hang = {"id": "hang", "label": "Hang", "userdata": {"hang": True}, "turns": [turn]}
    scenarios.write_text(yaml.safe_dump({"name": "Canaries", "scenarios": [hang]}))
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    results_dir = tmp_path / "out"
    env = clean_env(CANARY_API_KEY=key, CANARY_NAMES="CANARY_API_KEY", TMPDIR=str(private_tmp))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lkeval",
            "run",
            "--agent",
            str(TEST_AGENTS / "canary_agent.py"),
            "--scenarios",
            str(scenarios),
            "--results",
            str(results_dir / "results.json"),
            "--repeat",
            "1",  # one attempt, one log: the sequential test would start three at once
            *(["--cold-start"] if start == "cold" else []),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until the agent has printed its secrets
        raw = [p for p in private_tmp.rglob("hang.log") if "hanging with" in p.read_text()]
        if raw:
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the agent never printed its secret")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, out + err
    log = (results_dir / "logs" / "hang.log").read_text()
    assert "hanging with ***" in log and "\x1b[" not in log
    for path in results_dir.rglob("*"):
        if path.is_file():
            assert leaks(path.read_text(errors="replace"), [key]) == [], path
    assert leaks(out + err, [key]) == []
    assert not list(private_tmp.glob("lkeval-raw-logs-*")), "raw logs are removed"


def test_the_action_entrypoint_announces_every_canary_before_its_first_line(
    tmp_path: Path,
) -> None:
    # issue 19.1: `extra-args: --env DB=postgres://u:PASSWORD@h/x` was echoed in clear by the
    # entrypoint, whose own masker lacked the URL-password rule, and lkeval's ::add-mask::
    # came too late. Started as the runner starts the container; the real lkeval (--help).
    import subprocess
    import sys

    from action_runner import container_step
    from conftest import ROOT

    url_pass, named, token = canary("url"), canary("named"), canary("token")
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    step = container_step(
        action,
        {
            "agent": "agent.py",
            "scenarios": "s.yaml",
            "install": "none",
            "extra-args": f"--env DB=postgres://app:{url_pass}@db/x --env MODE=fast "
            "--secret-env DEPLOY_HOOK --help",
        },
        token=token,
    )
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = clean_env(
        GITHUB_ACTIONS="true",
        GITHUB_WORKSPACE=str(workspace),
        HOME=str(tmp_path / "home"),
        DEPLOY_HOOK=named,
        **step.env,
    )
    proc = subprocess.run(
        [sys.executable, str(ROOT / "entrypoint.py"), *step.argv],
        env=env,
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if not line.startswith("::add-mask::"))
    announced = {line.removeprefix("::add-mask::") for line in lines[:first]}
    assert {url_pass, named, token} <= announced
    shown = "\n".join(line for line in lines if not line.startswith("::add-mask::"))
    assert "DB=postgres://app:***@db/x" in shown and "MODE=fast" in shown
    assert leaks(shown + proc.stderr, [url_pass, named, token]) == []
