"""A fork's pull request has no secrets: ``lkeval run`` writes results saying so (no agent
boots), one ``::error`` names the empty secret and the recipe, and the ``workflow_run``
comment job posts those results. A PR from the repository itself still stops with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import HOTEL, clean_env, run_argv, run_lkeval
from github_server import FakeGitHub, github_server

from lkeval.publish.github.context import read_context
from lkeval.publish.github.fork import empty_secrets

REPO = "acme/hotel"
PR = 7


def pr_event(tmp_path: Path, head_repo: str | None) -> Path:
    head: dict[str, object] = {"sha": "abc123", "repo": None}
    if head_repo is not None:
        head["repo"] = {"full_name": head_repo, "fork": head_repo != REPO}
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps(
            {
                "number": PR,
                "pull_request": {
                    "number": PR,
                    "head": head,
                    "base": {"repo": {"full_name": REPO}},
                },
            }
        )
    )
    return event


def actions_env(tmp_path: Path, event: Path, gh: FakeGitHub, **extra: str) -> dict[str, str]:
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_SHA": "merge999",
        "GITHUB_API_URL": gh.base_url,
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
        "GITHUB_TOKEN": "ghs_read_only_fork_token",
        "OPENAI_API_KEY": "",  # `${{ secrets.OPENAI_API_KEY }}` on a fork
        "LKEVAL_GITHUB_TIMEOUT": "5",
    }
    return clean_env(**{**env, **extra})


@pytest.fixture
def gh() -> FakeGitHub:
    with github_server() as server:
        yield server  # type: ignore[misc]


def test_fork_pr_writes_results_that_say_why_and_the_comment_job_posts_them(
    tmp_path: Path, gh: FakeGitHub
) -> None:
    results = tmp_path / "out" / "results.json"
    argv = [*run_argv(HOTEL / "agent.py", HOTEL / "scenarios.yaml", results), "--comment", "off"]
    proc = run_lkeval(
        argv, actions_env(tmp_path, pr_event(tmp_path, "mallory/hotel"), gh), timeout=60
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr  # nothing ran: never a pass
    (error,) = [line for line in proc.stdout.splitlines() if line.startswith("::error title=")]
    assert "lk-eval could not run: OPENAI_API_KEY is empty" in error
    assert (
        "pull requests from forks" in error and "docs/action.md#pull-requests-from-forks" in error
    )
    data = json.loads(results.read_text())
    assert data["metadata"]["git_sha"] == "abc123"
    assert {s["status"] for s in data["scenarios"]} == {"error"}
    assert {s["reason"] for s in data["scenarios"]} == {
        "not run: no LLM credentials on a pull request from a fork (OPENAI_API_KEY is empty)"
    }
    assert not (tmp_path / "out" / "logs").exists()  # no agent was started
    summary = (tmp_path / "summary.md").read_text()
    assert "nothing could run" in summary and "from a fork" in summary

    # The workflow_run job on the default branch: posts those results on the PR.
    event = tmp_path / "run.json"
    event.write_text(json.dumps({"workflow_run": {"head_sha": "abc123", "pull_requests": []}}))
    env = actions_env(tmp_path, event, gh, GITHUB_EVENT_NAME="workflow_run", GITHUB_TOKEN=gh.token)
    report = run_lkeval(
        ["report", "--results", str(results), "--pr", str(PR), "--fail-on", "never"],
        env,
        timeout=60,
    )
    assert report.returncode == 3, report.stdout + report.stderr
    (comment,) = gh.comments_of(REPO, PR)
    assert "from a fork" in comment["body"] and "commit `abc123`" in comment["body"]


@pytest.mark.parametrize("head_repo", [REPO])
def test_a_pr_from_the_repository_itself_still_stops_with_exit_2(
    tmp_path: Path, gh: FakeGitHub, head_repo: str
) -> None:
    results = tmp_path / "out" / "results.json"
    argv = run_argv(HOTEL / "agent.py", HOTEL / "scenarios.yaml", results)
    proc = run_lkeval(argv, actions_env(tmp_path, pr_event(tmp_path, head_repo), gh), timeout=60)
    assert proc.returncode == 2 and not results.exists()
    assert "LiveKit Inference: set LIVEKIT_API_KEY and LIVEKIT_API_SECRET" in proc.stderr


def test_fork_is_read_from_the_payload(tmp_path: Path) -> None:
    def fork(head_repo: str | None) -> bool:
        env = {
            "GITHUB_EVENT_NAME": "pull_request",
            "GITHUB_EVENT_PATH": str(pr_event(tmp_path, head_repo)),
        }
        return read_context(env).fork

    assert fork("mallory/hotel") and not fork(REPO)
    assert fork(None)  # the fork was deleted: `"repo": null`
    assert not read_context({"GITHUB_EVENT_NAME": "push"}).fork


def test_empty_secrets_are_the_ones_github_withheld() -> None:
    env = {"OPENAI_API_KEY": "", "LIVEKIT_API_SECRET": "", "HOME": "", "GROQ_API_KEY": "gsk"}
    assert empty_secrets(env, ["OPENAI_API_KEY"]) == ["OPENAI_API_KEY", "LIVEKIT_API_SECRET"]
