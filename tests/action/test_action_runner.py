"""The entrypoint started exactly as GitHub's runner starts the action's container.

``action_runner.container_step`` turns action.yml and a step's ``with:`` into the container's
environment and argv, as ``ContainerActionHandler`` does; the entrypoint then runs with both,
in the workspace, and a stand-in ``lkeval`` records what it was given. Every input of
action.yml goes through this path once.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from action_runner import container_step, split_command_line
from conftest import ROOT, clean_env, fake_lkeval
from test_action import MAPPING

ENTRYPOINT = ROOT / "entrypoint.py"
TOKEN = "ghs_runner_token_for_tests"
RUN_INPUTS = {"agent": "agent.py", "scenarios": "scenarios.yaml"}

RECORDING_LKEVAL = """
import json, os, sys, tempfile
from pathlib import Path
if os.environ.get("WRITE_REPORTS"):  # as lkeval 0.1 did: an atomic write leaves mode 0600
    results = Path(sys.argv[sys.argv.index("--results") + 1])
    results.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=results.parent)
    os.close(fd)
    os.replace(tmp, results)
    (results.parent / "logs").mkdir(mode=0o700)
    (results.parent / "logs" / "agent.log").write_text("log")
    Path("agent-private.key").touch(mode=0o600)
Path(os.environ["RECORD"]).write_text(json.dumps({
    "argv": sys.argv[1:], "cwd": os.getcwd(),
    "env": {k: v for k, v in os.environ.items() if k.startswith(("GITHUB_", "INPUT_", "LKEVAL_"))},
}))
"""


def action() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def run_step(
    tmp_path: Path,
    with_: dict[str, str],
    action_yml: dict[str, Any] | None = None,
    **extra_env: str,
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    """Run the container's entrypoint for a step ``with:`` these inputs; what lkeval saw."""
    fake = fake_lkeval(tmp_path / "fake", RECORDING_LKEVAL)
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    record = tmp_path / "record.json"
    step = container_step(action_yml or action(), with_, token=TOKEN)
    env = clean_env(
        PYTHONPATH=str(fake),
        RECORD=str(record),
        HOME=str(tmp_path / "home"),
        GITHUB_ACTIONS="true",
        GITHUB_WORKSPACE=str(workspace),
        **step.env,
        **extra_env,
    )
    proc = run_container(step.argv, env, workspace)
    seen = json.loads(record.read_text()) if record.exists() else None
    return proc, seen


def run_container(
    argv: list[str], env: dict[str, str], workspace: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The entrypoint as the container runs it: ``argv`` and ``env`` from the runner, in the
    workspace, stdin closed; its output captured."""
    return subprocess.run(
        [sys.executable, str(ENTRYPOINT), *argv],
        env=env,
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def contains(argv: list[str], part: list[str]) -> bool:
    return any(argv[i : i + len(part)] == part for i in range(len(argv)))


# --- the model itself -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "argv"),
    [
        ("--llm-timeout 30", ["--llm-timeout", "30"]),
        ('  "a b"  c ', ["a b", "c"]),
        ('"say \\"hi\\""', ['say "hi"']),
        ('a\\\\"b c"', ["a\\b c"]),
        ('""', [""]),
        ("", []),
    ],
)
def test_command_line_split_as_dotnet_splits_it(line: str, argv: list[str]) -> None:
    assert split_command_line(line) == argv


def test_without_runs_args_the_runner_passes_an_args_input_as_the_command_line() -> None:
    # Why action.yml declares `args: []` and the input is `extra-args`: lk-eval 0.1 had no
    # runs.args and an input named `args`, so the entrypoint saw arguments, took the
    # "plain lkeval" path and ignored every other input.
    old = {"inputs": {"args": {"default": ""}, "agent": {}}, "runs": {"using": "docker"}}
    step = container_step(old, {"args": "--llm-timeout 30", "agent": "a.py"}, token=TOKEN)
    assert step.argv == ["--llm-timeout", "30"]
    assert step.env["INPUT_ARGS"] == "--llm-timeout 30"


def test_every_input_is_set_with_its_default_and_no_argument_is_passed() -> None:
    step = container_step(action(), {"args": "--anything", "agent": "a.py"}, token=TOKEN)
    assert step.argv == []
    assert {f"INPUT_{name.upper()}" for name in action()["inputs"]} <= set(step.env)
    assert step.env["INPUT_GITHUB-TOKEN"] == TOKEN
    assert step.env["INPUT_RESULTS"] == "lkeval-results/results.json"


# --- every input, through the entrypoint --------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MAPPING))
def test_input_reaches_lkeval_as_the_runner_delivers_it(tmp_path: Path, name: str) -> None:
    value, expected = MAPPING[name]
    proc, seen = run_step(tmp_path, {**RUN_INPUTS, name: value})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert seen is not None
    assert contains(seen["argv"], expected), seen["argv"]
    assert not any(k.startswith("INPUT_") for k in seen["env"]), "inputs are not passed on"


def test_extra_args_come_last_and_may_hold_options(tmp_path: Path) -> None:
    proc, seen = run_step(tmp_path, {**RUN_INPUTS, "extra-args": "--llm-timeout 30"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert seen and seen["argv"][-2:] == ["--llm-timeout", "30"]


def test_command_report_needs_no_agent(tmp_path: Path) -> None:
    proc, seen = run_step(tmp_path, {"command": "report", "results": "r.json"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert seen and seen["argv"][:3] == ["report", "--results", "r.json"]


def test_working_directory_and_install(tmp_path: Path) -> None:
    (tmp_path / "workspace" / "bot").mkdir(parents=True)
    proc, seen = run_step(
        tmp_path, {**RUN_INPUTS, "working-directory": "bot", "install": "echo ok > installed"}
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert seen and Path(seen["cwd"]) == (tmp_path / "workspace" / "bot").resolve()
    assert (tmp_path / "workspace" / "bot" / "installed").read_text() == "ok\n"


def test_github_token_reaches_lkeval_in_its_environment_only(tmp_path: Path) -> None:
    proc, seen = run_step(tmp_path, {**RUN_INPUTS, "github-token": "ghs_given"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert seen and seen["env"]["GITHUB_TOKEN"] == "ghs_given"
    assert not any("ghs_" in arg for arg in seen["argv"])
    # ...and by default the runner's own token, from `${{ github.token }}`
    _, default = run_step(tmp_path, RUN_INPUTS)
    assert default and default["env"]["GITHUB_TOKEN"] == TOKEN


def test_lkeval_is_told_which_input_each_option_came_from(tmp_path: Path) -> None:
    _, seen = run_step(tmp_path, RUN_INPUTS)
    assert seen is not None
    names = json.loads(seen["env"]["LKEVAL_INPUT_NAMES"])
    assert names["--pr"] == "pr" and names["--no-summary"] == "summary"


def test_the_old_args_input_fails_the_step_naming_its_new_name(tmp_path: Path) -> None:
    proc, seen = run_step(tmp_path, {**RUN_INPUTS, "args": "--llm-timeout 30"})
    assert proc.returncode == 2
    assert seen is None, "lkeval must not run with the other inputs ignored"
    assert "::error::lk-eval: input `args`: renamed to `extra-args`" in proc.stdout


@pytest.mark.parametrize(
    ("name", "value"),
    [("pr", "--pr=1"), ("maybe-is-pass", "yes"), ("working-directory", "missing")],
)
def test_errors_name_the_input_the_user_set(tmp_path: Path, name: str, value: str) -> None:
    proc, seen = run_step(tmp_path, {**RUN_INPUTS, name: value})
    assert proc.returncode == 2 and seen is None
    assert f"::error::lk-eval: input `{name}`: " in proc.stdout


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("pr", "abc", "invalid int value: 'abc'"),
        ("concurrency", "0", "must be 1 or more"),
        ("min-pass-rate", "95", "give a fraction 0..1 or a percentage"),
        ("comment-id", "a--b", "comment id 'a--b'"),
        ("agent", "missing.py", "missing.py: no such file"),
    ],
)
def test_lkevals_own_errors_name_the_input_the_user_set(
    tmp_path: Path, name: str, value: str, says: str
) -> None:
    """The real lkeval, not the recording one: its parser and its error boundary."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    step = container_step(action(), {**RUN_INPUTS, "install": "none", name: value}, token=TOKEN)
    env = clean_env(GITHUB_ACTIONS="true", GITHUB_WORKSPACE=str(workspace), **step.env)
    proc = run_container(step.argv, env, workspace)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("::error::")]
    assert f"input `{name}`" in line and says in line, line
    assert f"--{name}" not in line and "usage:" not in proc.stderr


def test_outside_the_action_errors_name_the_option() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "lkeval", "report", "--results", "r.json", "--pr", "abc"],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "argument --pr: invalid int value: 'abc'" in proc.stderr
    assert "::error" not in proc.stderr


# --- the workspace, handed back ---------------------------------------------------------------

RUNNER_UID = RUNNER_GID = 1001  # the runner user of GitHub's hosted runners


@pytest.mark.skipif(
    os.geteuid() != 0,
    reason="handing files to another user needs root, as "
    "in the container (.ci/image-check checks it in the real image)",
)
def test_what_the_container_wrote_is_handed_to_the_workspace_owner(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "bot").mkdir(parents=True)
    (workspace / "bot" / "checked-out.py").write_text("")
    for path in (workspace, workspace / "bot", workspace / "bot" / "checked-out.py"):
        os.chown(path, RUNNER_UID, RUNNER_GID)
    proc, _ = run_step(
        tmp_path,
        {**RUN_INPUTS, "working-directory": "bot", "results": "out/results.json"},
        WRITE_REPORTS="1",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    bot = workspace / "bot"
    for path in (
        bot / "out",
        bot / "out" / "results.json",
        bot / "out" / "logs",
        bot / "out" / "logs" / "agent.log",
        bot / "agent-private.key",
    ):
        info = path.lstat()
        assert (info.st_uid, info.st_gid) == (RUNNER_UID, RUNNER_GID), path
    mode = {p.name: stat.S_IMODE(p.lstat().st_mode) for p in (bot / "out").rglob("*")}
    assert mode["results.json"] == 0o644  # lk-eval's report: readable by later steps
    assert stat.S_IMODE((bot / "out").stat().st_mode) == 0o755
    assert stat.S_IMODE((bot / "agent-private.key").stat().st_mode) == 0o600  # not ours
