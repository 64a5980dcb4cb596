"""A fork's pull request without LLM credentials is decided before the run starts
(:func:`lkeval.cli.run.fork_mode`): it replays its cassettes with no key, or reports every
scenario not run; never by catching the credentials error of a run and running again."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import HOTEL

from lkeval.cli import build_parser
from lkeval.cli.options import RunOptions, run_options
from lkeval.cli.run import ForkNotRun, ForkReplay, fork_mode

SCENARIOS = HOTEL / "scenarios.yaml"


def _options(*extra: str, scenarios: Path = SCENARIOS) -> RunOptions:
    argv = ["run", "--agent", str(HOTEL / "agent.py"), "--scenarios", str(scenarios), *extra]
    return run_options(build_parser().parse_args([*argv, "--github"]), environ={})


def _actions(tmp_path: Path, head_repo: str, **env: str) -> dict[str, str]:
    event = tmp_path / "event.json"
    pull = {"number": 7, "head": {"repo": {"full_name": head_repo}}}
    pull["base"] = {"repo": {"full_name": "acme/hotel"}}
    event.write_text(json.dumps({"number": 7, "pull_request": pull}))
    return {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(event), **env}


def test_a_run_that_is_not_a_forks_pull_request_runs_as_any_run(tmp_path: Path) -> None:
    assert fork_mode(_options(), _actions(tmp_path, "acme/hotel", OPENAI_API_KEY="")) is None


def test_a_fork_with_its_credentials_runs_as_any_run(tmp_path: Path) -> None:
    env = _actions(tmp_path, "mallory/hotel", LIVEKIT_API_KEY="k", LIVEKIT_API_SECRET="s")
    assert fork_mode(_options(), env) is None


def test_a_fork_with_an_empty_secret_and_cassettes_replays(tmp_path: Path) -> None:
    env = _actions(tmp_path, "mallory/hotel", OPENAI_API_KEY="")
    mode = fork_mode(_options("--cassettes", str(tmp_path / "tapes")), env)
    assert isinstance(mode, ForkReplay) and "OPENAI_API_KEY" in mode.detail


def test_a_fork_missing_credentials_with_cassettes_replays(tmp_path: Path) -> None:
    mode = fork_mode(_options("--cassettes", str(tmp_path / "tapes")), _actions(tmp_path, "m/h"))
    assert isinstance(mode, ForkReplay) and "LIVEKIT_API_KEY" in mode.detail


def test_a_fork_missing_credentials_without_cassettes_is_not_run(tmp_path: Path) -> None:
    mode = fork_mode(_options(), _actions(tmp_path, "mallory/hotel", OPENAI_API_KEY=""))
    assert isinstance(mode, ForkNotRun)
    assert [s.id for s in mode.plan.selected] and "LIVEKIT_API_KEY" in mode.missing.variables


def test_a_fork_whose_scenarios_do_not_load_runs_so_the_run_reports_them(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("scenarios: [\n")
    env = _actions(tmp_path, "mallory/hotel", OPENAI_API_KEY="")
    assert fork_mode(_options(scenarios=bad), env) is None
