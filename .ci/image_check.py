"""Run the lk-eval image exactly as GitHub's runner runs a Docker action, and check the result.

Called by .ci/image-check with the engine (podman here, docker in release.yml) and the image.
The container gets what ``ContainerActionHandler`` gives it (tests/action_runner.py models
it): the workspace mounted at /github/workspace and owned by the runner's user (uid 1001),
/github/home, /github/workflow (the event payload) and /github/file_commands (GITHUB_OUTPUT,
GITHUB_STEP_SUMMARY), the GITHUB_* context, the step's env, every input as INPUT_*, and the
arguments the runner passes (none: action.yml declares ``args: []``). The example agent talks
to lk-eval's scripted LLM server, run from the same image on the host's loopback.

Checked: the exit code, the outputs, the summary, the results; the PR's head sha recorded
with no git in the image, JUnit ``file`` relative to the repository (not working-directory);
every file in the workspace and $HOME owned by the runner's user (uid 1001 when the check runs as
root and plays the runner; else the user running it, as in a hosted runner's job), lk-eval's
reports 0644 and their folders 0755,
no bytecode or build litter; ``extra-args`` reaching lkeval; the old ``args`` input refused by
name; a fork's PR with no secrets ending in results that say so (exit 3); and a stop (SIGTERM,
as when a job is cancelled) mid-run giving exit 143 with partial results.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import yaml  # noqa: E402
from action_runner import container_step  # noqa: E402

#: The runner user a root check plays (uid 1001 on hosted runners). As any other user (a
#: hosted runner's job: uid 1001, group 121), the check is that user and chowns nothing.
RUNNER_UID = RUNNER_GID = 1001
WORKSPACE = "/github/workspace"
HOTEL = ROOT / "examples" / "hotel"
TOKEN = "ghs_image_check_not_a_real_token"
LITTER = ("__pycache__", "build")


class CheckFailed(Exception):
    """One expectation did not hold; the message says which and what was seen."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


class Engine:
    """podman or docker, used as the runner uses docker."""

    def __init__(self, command: str, image: str) -> None:
        self.command = command
        self.image = image

    def __call__(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.command, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def llm_server(engine: Engine, rules: Path, name: str) -> Iterator[str]:
    """lk-eval's scripted OpenAI-compatible server, from the image, on the host's loopback."""
    port = free_port()
    started = engine(
        "run",
        "--detach",
        "--rm",
        "--name",
        name,
        "--network",
        "host",
        "--volume",
        f"{rules.parent}:/rules:ro",
        "--entrypoint",
        "python",
        engine.image,
        "-m",
        "lkeval.testing.llm_server",
        "--rules",
        f"/rules/{rules.name}",
        "--port",
        str(port),
    )
    check(started.returncode == 0, f"LLM server did not start: {started.stderr}")
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=2):
                    break
            except OSError:
                check(time.monotonic() < deadline, "LLM server never answered")
                time.sleep(0.3)
        yield base_url
    finally:
        engine("stop", "--time", "5", name, timeout=60)


HEAD_SHA = "a1" * 20


def pr_event(head_repo: str) -> dict[str, object]:
    """A pull_request payload; ``head_repo`` other than acme/hotel makes it a fork's PR."""
    head = {"sha": HEAD_SHA, "repo": {"full_name": head_repo}}
    pull = {"number": 7, "head": head, "base": {"repo": {"full_name": "acme/hotel"}}}
    return {"number": 7, "pull_request": pull}


class Runner:
    """One job's worth of runner directories, and Docker action steps run in them."""

    def __init__(self, engine: Engine, root: Path) -> None:
        self.engine = engine
        self.root = root
        self.workspace = root / "workspace"
        self.home = root / "home"
        self.workflow = root / "workflow"
        self.commands = root / "file_commands"
        self.action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
        for folder in (self.workspace, self.home, self.workflow, self.commands):
            folder.mkdir(parents=True)
        shutil.copytree(
            HOTEL, self.workspace / "agent", ignore=shutil.ignore_patterns("__pycache__")
        )
        (self.workspace / "agent" / "requirements.txt").write_text("pyyaml\n")
        (self.workflow / "event.json").write_text(json.dumps(pr_event("acme/hotel")))
        self.owner = runner_user()
        if os.geteuid() == 0:  # play the runner: its folders belong to its user, not root's
            for folder in (self.workspace, self.home):
                for path in (folder, *folder.rglob("*")):
                    os.lchown(path, *self.owner)

    def command(
        self, name: str, with_: Mapping[str, str], env: Mapping[str, str], *, detach: bool = False
    ) -> list[str]:
        """The ``run`` command line of one step, as the runner builds it."""
        for file in ("set_output", "step_summary"):
            (self.commands / file).write_text("")
        step = container_step(self.action, with_, token=TOKEN)
        context = {
            "GITHUB_ACTIONS": "true",
            "CI": "true",
            "HOME": "/github/home",
            "GITHUB_WORKSPACE": WORKSPACE,
            "GITHUB_EVENT_NAME": "pull_request",
            "GITHUB_EVENT_PATH": "/github/workflow/event.json",
            "GITHUB_OUTPUT": "/github/file_commands/set_output",
            "GITHUB_STEP_SUMMARY": "/github/file_commands/step_summary",
            "GITHUB_REPOSITORY": "acme/hotel",
            "GITHUB_SHA": "e3" * 20,
            "GITHUB_SERVER_URL": "https://github.example",
            "GITHUB_RUN_ID": "1",
        }
        variables = {**context, **env, **step.env}
        args = ["run", "--name", name, "--network", "host", "--workdir", WORKSPACE]
        args += ["--detach"] if detach else ["--rm"]
        for key, value in variables.items():
            args += ["--env", f"{key}={value}"]
        for source, target in (
            (self.home, "/github/home"),
            (self.workflow, "/github/workflow"),
            (self.commands, "/github/file_commands"),
            (self.workspace, WORKSPACE),
        ):
            args += ["--volume", f"{source}:{target}"]
        return [*args, self.engine.image, *step.argv]

    def step(
        self, name: str, with_: Mapping[str, str], env: Mapping[str, str]
    ) -> subprocess.CompletedProcess[str]:
        return self.engine(*self.command(name, with_, env), timeout=900)

    def outputs(self) -> dict[str, str]:
        """``$GITHUB_OUTPUT`` as the runner reads it: ``name=value`` and ``name<<EOF`` blocks."""
        values: dict[str, str] = {}
        lines = iter((self.commands / "set_output").read_text().splitlines())
        for line in lines:
            if "<<" in line and "=" not in line.split("<<", 1)[0]:
                name, end = line.split("<<", 1)
                values[name] = "\n".join(iter(lambda: next(lines), end))
            else:
                name, _, value = line.partition("=")
                values[name] = value
        return values


def runner_user() -> tuple[int, int]:
    """Whose the runner's folders are: uid:gid 1001 when played by root, else this process's
    own (a hosted runner's job runs as uid 1001, group 121, and cannot chown to anyone)."""
    if os.geteuid() == 0:
        return RUNNER_UID, RUNNER_GID
    return os.geteuid(), os.getegid()


def check_handed_back(runner: Runner, reports: list[Path]) -> None:
    """Everything in the workspace and $HOME owned by the runner's user (the container is root
    and must hand back what it wrote); lk-eval's reports readable; no litter."""
    for folder, name in ((runner.workspace, "the checkout"), (runner.home, "$HOME")):
        for path in folder.rglob("*"):
            info = path.lstat()
            check(
                (info.st_uid, info.st_gid) == runner.owner,
                f"{name}: {path.relative_to(folder)} is owned by {info.st_uid}:{info.st_gid}, "
                f"not {runner.owner[0]}:{runner.owner[1]}",
            )
            check(
                path.name not in LITTER and not path.name.endswith(".egg-info"),
                f"{path.relative_to(folder)} left in {name}",
            )
    for report in reports:
        check(stat.S_IMODE(report.stat().st_mode) == 0o644, f"{report.name} is not 0644")
        check(stat.S_IMODE(report.parent.stat().st_mode) == 0o755, f"{report.parent} not 0755")


HOTEL_INPUTS = {
    "working-directory": "agent",
    "agent": "agent.py",
    "scenarios": "scenarios.yaml",
    "caller-model": "caller",
    "judge-model": "judge",
    "quarantine": "flaky=true",
    "markdown": "lkeval-results/report.md",
    "comment": "off",
    "concurrency": "2",
}


def hotel_env(base_url: str) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "not-needed-locally",
        "HOTEL_AGENT_MODEL": "hotel-agent",
    }


def check_run(runner: Runner, base_url: str) -> None:
    """The example end to end: gate, outputs, summary, results, the workspace handed back."""
    with_ = {**HOTEL_INPUTS, "extra-args": "--llm-timeout 30 --logs-dir 'agent logs'"}
    started = time.monotonic()
    proc = runner.step("lkeval-check-run", with_, hotel_env(base_url))
    print(f"   run: exit {proc.returncode} in {time.monotonic() - started:.0f} s")
    check(proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}{proc.stderr}")
    outputs = runner.outputs()
    counts = {key: outputs.get(key) for key in ("gate", "exit-code", "total", "quarantined")}
    check(
        counts == {"gate": "pass", "exit-code": "0", "total": "4", "quarantined": "1"},
        f"outputs {outputs}",
    )
    check(set(outputs) == set(runner.action["outputs"]), f"outputs {sorted(outputs)}")
    summary = (runner.commands / "step_summary").read_text()
    check("Agent vetoes" in summary, "the job summary lacks the report")
    agent = runner.workspace / "agent"
    results = json.loads((agent / "lkeval-results" / "results.json").read_text())
    argv = results["metadata"]["argv"]
    check(
        argv[-4:] == ["--llm-timeout", "30", "--logs-dir", "agent logs"],
        f"extra-args did not reach lkeval last: {argv}",
    )
    check(any((agent / "agent logs").iterdir()), "--logs-dir from extra-args not used")
    sha = results["metadata"]["git_sha"]
    check(sha == HEAD_SHA, f"git_sha {sha!r}: not the PR's head (the image has no git)")
    junit = (agent / "lkeval-results" / "junit.xml").read_text()
    check('file="agent/scenarios.yaml"' in junit, "JUnit file is not relative to the repository")
    reports = [agent / "lkeval-results" / n for n in ("results.json", "junit.xml", "report.md")]
    check_handed_back(runner, reports)


def check_old_args_input(runner: Runner) -> None:
    """`args:` (the 0.1 name) fails the step by name instead of replacing the command line."""
    proc = runner.step("lkeval-check-args", {**HOTEL_INPUTS, "args": "--llm-timeout 30"}, {})
    check(proc.returncode == 2, f"args: exit {proc.returncode}")
    check("input `args`: renamed to `extra-args`" in proc.stdout, proc.stdout[-2000:])


def check_fork(runner: Runner) -> None:
    """A fork's PR has no secrets: no agent boots, results say why, exit 3, handed back."""
    (runner.workflow / "event.json").write_text(json.dumps(pr_event("mallory/hotel")))
    env = {"OPENAI_API_KEY": "", "HOTEL_AGENT_MODEL": "hotel-agent"}
    inputs = {k: v for k, v in HOTEL_INPUTS.items() if not k.endswith("-model")}
    proc = runner.step("lkeval-check-fork", inputs, env)
    check(proc.returncode == 3, f"fork: exit {proc.returncode}\n{proc.stdout[-2000:]}")
    check("could not run: OPENAI_API_KEY is empty" in proc.stdout, proc.stdout[-2000:])
    results = runner.workspace / "agent" / "lkeval-results" / "results.json"
    data = json.loads(results.read_text())
    check({s["status"] for s in data["scenarios"]} == {"error"}, "fork: not all not-run errors")
    check(runner.outputs().get("exit-code") == "3", f"fork outputs {runner.outputs()}")
    check_handed_back(runner, [results])


def check_stop(runner: Runner, engine: Engine, base_url: str) -> None:
    """``stop`` mid-run (a cancelled job): exit 143, partial results, handed back."""
    name = "lkeval-check-stop"
    engine("rm", "--force", name)
    started = engine(
        *runner.command(name, HOTEL_INPUTS | {"concurrency": "1"}, hotel_env(base_url), detach=True)
    )
    check(started.returncode == 0, f"could not start: {started.stderr}")
    try:
        logs = runner.workspace / "agent" / "lkeval-results" / "logs"
        deadline = time.monotonic() + 300
        # a scenario's own log (fork-server.log is written before any scenario starts)
        while not (logs.is_dir() and any(p.name != "fork-server.log" for p in logs.glob("*.log"))):
            check(time.monotonic() < deadline, "no scenario started in 300 s")
            time.sleep(0.5)
        engine("stop", "--time", "60", name, timeout=120)
        code = engine("wait", name, timeout=120).stdout.strip()
        logged = engine("logs", name)
        log = (logged.stdout + logged.stderr)[-3000:]
        check(code == "143", f"stop: exit {code}\n{log}")
    finally:
        engine("rm", "--force", name)
    results = runner.workspace / "agent" / "lkeval-results" / "results.json"
    check(results.is_file(), f"no partial results after the stop\n{log}")
    data = json.loads(results.read_text())
    check(data["metadata"]["interrupted"] is True, "results not marked interrupted")
    check_handed_back(runner, [results])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="podman")
    parser.add_argument("--image", required=True)
    args = parser.parse_args()
    engine = Engine(args.engine, args.image)
    checks = 0
    with tempfile.TemporaryDirectory(prefix="lkeval-image-check-") as tmp:
        root = Path(tmp)
        slow_rules = root / "rules" / "slow.yaml"
        slow_rules.parent.mkdir()
        slow_rules.write_text((HOTEL / "llm_rules.yaml").read_text() + "\nserver: {delay: 1}\n")
        try:
            with llm_server(engine, HOTEL / "llm_rules.yaml", "lkeval-check-llm") as url:
                check_run(Runner(engine, root / "run"), url)
                checks += 1
                check_old_args_input(Runner(engine, root / "args"))
                checks += 1
                check_fork(Runner(engine, root / "fork"))
                checks += 1
            with llm_server(engine, slow_rules, "lkeval-check-slow-llm") as url:
                check_stop(Runner(engine, root / "stop"), engine, url)
                checks += 1
        except CheckFailed as failed:
            print(f"== image-check: FAILED: {failed}", flush=True)
            print(f"{checks} passed, 1 failed")
            return 1
    print(
        "== image-check: the image runs as a Docker action: outputs, summary, results, "
        "ownership and modes, head sha and JUnit paths, extra-args, args refused, a fork's PR "
        "(exit 3 with results), stop → 143 with partial results"
    )
    print(f"{checks} passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
