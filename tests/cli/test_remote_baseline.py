"""``--baseline github:BRANCH`` through ``lkeval report`` (and ``run``'s writers) against a
loopback GitHub: the branch's own latest results are compared, a missing baseline is a note
and never a failure, a broken one is exit 2, and the token appears nowhere."""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from github_server import FakeGitHub, github_server
from report_fixtures import main_results, results_of, scenario, write_results

from lkeval.cli import main
from lkeval.cli.options import ReportOptions
from lkeval.cli.report import RunWriters
from lkeval.publish.github.remote_baseline import fetch_baseline
from lkeval.results.model import RunResults
from lkeval.results.results_json import dump_results

REPO = "octo/agent"
NAME = "lk-eval-results"


def results_zip(results: RunResults, member: str = "results.json") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(member, dump_results(results))
        archive.writestr("logs/agent.log", "booted\n")
    return buffer.getvalue()


def both_pass() -> RunResults:
    """main's run (another run than the pull request's: a baseline cannot be the run it gates)."""
    return main_results(scenario("a"), scenario("b"))


def b_fails() -> RunResults:
    return results_of(scenario("a"), scenario("b", "failed"))


@pytest.fixture
def gh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    for name in list(os.environ):
        if name.startswith(("GITHUB_", "LKEVAL_", "RUNNER_", "INPUT_")):
            monkeypatch.delenv(name)
    with github_server() as server:
        for key, value in {
            "GITHUB_API_URL": server.base_url,
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_TOKEN": server.token,
            "GITHUB_RUN_ID": "1",
            "GITHUB_WORKFLOW_REF": f"{REPO}/.github/workflows/eval.yml@refs/pull/7/merge",
            "GITHUB_EVENT_NAME": "pull_request",
            "LKEVAL_GITHUB_TIMEOUT": "5",
        }.items():
            monkeypatch.setenv(key, value)
        yield server


def report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], results: RunResults, *argv: str
) -> tuple[int, str]:
    path = tmp_path / "results.json"
    write_results(results, path)
    capsys.readouterr()
    markdown = tmp_path / "report.md"
    code = main(
        ["report", "--results", str(path), "--no-github", "--markdown", str(markdown), *argv]
    )
    out = capsys.readouterr()
    return code, out.out + out.err + markdown.read_text(encoding="utf-8")


def test_a_regression_against_main_fails_and_names_the_run(
    gh: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gh.add_run(sha="a" * 40, artifacts={NAME: results_zip(both_pass())})
    code, out = report(
        tmp_path, capsys, b_fails(), "--baseline", "github:main", "--fail-on", "regression"
    )
    assert code == 1
    assert "1 scenario regressed vs the baseline" in out
    assert "baseline: main run #1 (commit aaaaaaaaaaaa, success)" in out
    assert "run &#35;1](https://github.example/octo/agent/actions/runs/" in out  # the comment
    assert gh.token not in out and gh.blob_leaks == []


def test_a_baseline_from_another_branch_is_never_used(
    gh: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # main: b passed. Newer, elsewhere: b already failing (which would excuse the PR's failure).
    gh.add_run(sha="a" * 40, artifacts={NAME: results_zip(both_pass())})
    gh.add_run(branch="feature", sha="c" * 40, artifacts={NAME: results_zip(b_fails())})
    gh.add_run(sha="d" * 40, head_repository_id=99, artifacts={NAME: results_zip(b_fails())})
    gh.add_run(sha="e" * 40, event="pull_request", artifacts={NAME: results_zip(b_fails())})
    code, out = report(
        tmp_path, capsys, b_fails(), "--baseline", "github:main", "--fail-on", "regression"
    )
    assert code == 1 and "1 scenario regressed vs the baseline" in out
    assert "commit aaaaaaaaaaaa" in out


@pytest.mark.parametrize("why", ["first run", "expired", "no permission", "rate limit"])
def test_no_baseline_is_a_note_not_a_failure(
    why: str, gh: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if why != "first run":
        gh.add_run(artifacts={NAME: results_zip(both_pass())}, expired=why == "expired")
    gh.actions_read = why != "no permission"
    gh.rate_limit = "primary" if why == "rate limit" else None
    code, out = report(
        tmp_path, capsys, both_pass(), "--baseline", "github:main", "--fail-on", "regression"
    )
    assert code == 0, out
    assert "no baseline: " in out and "--fail-on regression acts as --fail-on any" in out
    # ... and a failure still fails: a missing baseline never waves one through
    code, out = report(
        tmp_path, capsys, b_fails(), "--baseline", "github:main", "--fail-on", "regression"
    )
    assert code == 1 and "1 scenario failed or errored" in out, out


def test_without_a_token_or_repository_it_says_so(
    gh: FakeGitHub,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN")
    code, out = report(tmp_path, capsys, both_pass(), "--baseline", "github:main")
    assert code == 0 and "no baseline: no GitHub token" in out
    monkeypatch.delenv("GITHUB_REPOSITORY")
    code, out = report(tmp_path, capsys, both_pass(), "--baseline", "github:main")
    assert code == 0 and "no baseline: GITHUB_REPOSITORY" in out
    assert gh.requests == []


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ({"../results.json": "{}"}, "climbs out"),
        ({"results.json": "{not json"}, "results.json:1: not valid JSON"),
        ({"other.json": "{}"}, "holds no results.json"),
    ],
)
def test_a_broken_baseline_is_a_clear_exit_2(
    content: dict[str, str],
    error: str,
    gh: FakeGitHub,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in content.items():
            archive.writestr(name, data)
    gh.add_run(artifacts={NAME: buffer.getvalue()})
    path = tmp_path / "results.json"
    write_results(both_pass(), path)
    capsys.readouterr()
    code = main(["report", "--results", str(path), "--no-github", "--baseline", "github:main"])
    err = capsys.readouterr().err
    assert code == 2
    assert "baseline github:main (main run #1" in err and error in err
    assert gh.token not in err


def test_a_zip_bomb_baseline_is_refused(
    gh: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("results.json", b" " * (80 * 1024 * 1024))  # past MAX_RESULTS_BYTES
    gh.add_run(artifacts={NAME: buffer.getvalue()})
    path = tmp_path / "results.json"
    write_results(both_pass(), path)
    capsys.readouterr()
    assert main(["report", "--results", str(path), "--no-github", "--baseline", "github:"]) == 2
    assert "zip bomb" in capsys.readouterr().err


def test_github_alone_is_the_default_branch_from_the_payload_or_the_api(
    gh: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gh.default_branch = "trunk"
    gh.add_run(branch="trunk", sha="7" * 40, artifacts={NAME: results_zip(both_pass())})
    fetched = fetch_baseline("github:")
    assert fetched.results is not None and fetched.source.startswith("trunk run #1")
    assert any(r.path == f"/repos/{REPO}" for r in gh.requests)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"repository": {"default_branch": "main"}}))
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    assert (
        fetch_baseline("github:").missing == "no artifact 'lk-eval-results' from a run on "
        "branch 'main' (1 from other branches)"
    )


def test_the_artifact_name_can_be_chosen(
    gh: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gh.add_run(artifacts={"lkeval-merged": results_zip(both_pass())})
    code, out = report(
        tmp_path,
        capsys,
        b_fails(),
        "--baseline",
        "github:main",
        "--baseline-artifact",
        "lkeval-merged",
        "--fail-on",
        "regression",
    )
    assert code == 1 and "baseline: main run #1" in out


def test_run_fetches_once_before_the_boot_and_gates_with_it(gh: FakeGitHub, tmp_path: Path) -> None:
    gh.add_run(artifacts={NAME: results_zip(both_pass())})
    out = io.StringIO()
    options = ReportOptions(baseline="github:main", fail_on="regression")
    writers = RunWriters(options, out)
    writers.check_baseline()
    assert len(gh.blob_requests) == 1
    code = writers.finish(b_fails(), tmp_path / "results.json", interrupted=False)
    assert code == 1 and len(gh.blob_requests) == 1
    assert "baseline: main run #1" in out.getvalue()


def test_an_interrupted_run_does_not_start_a_fetch(gh: FakeGitHub, tmp_path: Path) -> None:
    gh.add_run(artifacts={NAME: results_zip(both_pass())})
    out = io.StringIO()
    options = ReportOptions(baseline="github:main", fail_on="regression")
    writers = RunWriters(options, out)
    writers.finish(b_fails(), tmp_path / "results.json", interrupted=True)
    assert gh.requests == []
    assert "no baseline: not fetched (the run was interrupted)" in out.getvalue()


def _run_options(tmp_path: Path):  # type: ignore[no-untyped-def]
    from lkeval.cli.options import RunOptions

    return RunOptions(agent="agent.py", scenarios=("s.yaml",), results=str(tmp_path / "r.json"))
