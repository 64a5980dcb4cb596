"""The checkout without a git binary, checked against real git; JUnit paths from the root."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import clean_env, run_lkeval
from junitparser import JUnitXml
from report_fixtures import results_of, scenario, write_results

from lkeval.publish.github.checkout import head, recorded_commit, repo_root
from lkeval.reporters import build_report
from lkeval.reporters.junit import JUnitReporter, repo_path
from lkeval.results.gate import evaluate_gate

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="checked against real git")


def git(cwd: Path, *args: str) -> str:
    env = clean_env(
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.com",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.com",
    )
    out = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "agent" / "evals").mkdir(parents=True)
    (root / "agent" / "evals" / "s.yaml").write_text("scenarios: []\n")
    git(root, "init", "-q", "-b", "feature")
    git(root, "add", ".")
    git(root, "commit", "-qm", "one")
    return root


@needs_git
def test_head_reads_what_git_says_loose_packed_and_detached(repo: Path) -> None:
    sha = git(repo, "rev-parse", "HEAD")
    assert head(repo) == (sha, "feature")
    git(repo, "pack-refs", "--all")  # the ref now lives in packed-refs only
    assert not (repo / ".git" / "refs" / "heads" / "feature").exists()
    assert head(repo) == (sha, "feature")
    git(repo, "checkout", "-q", "--detach")  # how actions/checkout leaves a PR
    assert head(repo) == (sha, None)


@needs_git
def test_a_worktree_is_read_through_its_dot_git_file(repo: Path, tmp_path: Path) -> None:
    git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    git(repo, "pack-refs", "--all")
    other = tmp_path / "other"
    git(repo, "worktree", "add", "-q", "-b", "side", str(other), "HEAD~1")
    assert (other / ".git").is_file()
    assert head(other) == (git(other, "rev-parse", "HEAD"), "side")
    assert repo_root({}, other / "agent" / "evals") == other.resolve()


@needs_git
def test_root_is_github_workspace_else_the_folder_with_dot_git(repo: Path) -> None:
    deep = repo / "agent" / "evals"
    assert repo_root({}, deep) == repo.resolve()
    assert repo_root({"GITHUB_WORKSPACE": str(repo / "agent")}, deep) == (repo / "agent").resolve()
    assert repo_root({}, Path("/")) is None or (Path("/") / ".git").exists()


def test_recorded_commit_is_the_prs_head_not_the_merge_commit(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 3, "head": {"sha": "head123"}}}))
    env = {
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_SHA": "merge999",
        "GITHUB_HEAD_REF": "feature",
        "GITHUB_WORKSPACE": str(tmp_path),
    }
    assert recorded_commit(env) == ("head123", "feature")
    push = {
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_SHA": "pushed1",
        "GITHUB_REF_TYPE": "branch",
        "GITHUB_REF_NAME": "main",
        "GITHUB_WORKSPACE": str(tmp_path),
    }
    assert recorded_commit(push) == ("pushed1", "main")


def test_repo_path() -> None:
    assert repo_path("evals/s.yaml", None) == "evals/s.yaml"
    root = str(Path.cwd().parent)
    assert repo_path("evals/s.yaml", root) == f"{Path.cwd().name}/evals/s.yaml"
    assert repo_path("/elsewhere/s.yaml", str(Path.cwd())) == "/elsewhere/s.yaml"
    assert repo_path("", root) == ""


def junit_files(path: Path) -> set[str]:
    return {case._elem.get("file") for suite in JUnitXml.fromfile(str(path)) for case in suite}


@needs_git
def test_junit_file_is_relative_to_the_root_from_a_working_directory(
    repo: Path, tmp_path: Path
) -> None:
    agent = repo / "agent"
    results = results_of(
        scenario("a", file="evals/s.yaml"), scenario("b", "failed", file="evals/s.yaml")
    )
    write_results(results, agent / "results.json")
    argv = ["report", "--results", "results.json", "--junit", "out/junit.xml", "--no-github"]
    for env in (clean_env(), clean_env(GITHUB_WORKSPACE=str(repo))):  # .git, then Actions
        proc = run_lkeval(argv, env, cwd=agent, timeout=60)
        assert proc.returncode == 1, proc.stderr
        assert junit_files(agent / "out" / "junit.xml") == {"agent/evals/s.yaml"}
        assert (repo / "agent" / "evals" / "s.yaml").is_file()  # a path that resolves
    # Outside any checkout the path stays as the results name it.
    lone = tmp_path / "lone"
    lone.mkdir()
    write_results(results, lone / "results.json")
    assert run_lkeval(argv, clean_env(), cwd=lone, timeout=60).returncode == 1
    assert junit_files(lone / "out" / "junit.xml") == {"evals/s.yaml"}


def test_junit_reporter_without_a_root_keeps_the_path() -> None:
    results = results_of(scenario("a", file="evals/s.yaml"))
    report = build_report(results, None, evaluate_gate(results, None))
    assert 'file="evals/s.yaml"' in JUnitReporter().format(report)
