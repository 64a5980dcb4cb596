"""End to end: ``publish``/``lkeval report`` against a real loopback GitHub REST server."""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import pytest
from conftest import reset_then_ask
from github_server import FakeGitHub, github_server
from report_fixtures import (
    ERRORED,
    FAILED,
    baseline_results,
    msg,
    results_of,
    run_results,
    scenario,
    verdicts_for,
    write_results,
)

from lkeval.cli import main
from lkeval.cli.flags import add_report_arguments
from lkeval.cli.options import ReportOptions, parse_pass_rate
from lkeval.cli.report import BaselineError, resolve_baseline
from lkeval.results.model import Attempt, JudgeCheck, RunResults

REPO = "acme/hotel"
PR = 7


@dataclass
class Actions:
    """A GitHub Actions step environment pointing at the fake server."""

    gh: FakeGitHub
    tmp: Path
    summary: Path
    output: Path

    def outputs(self) -> dict[str, str]:
        """Parse $GITHUB_OUTPUT (``k=v`` and ``k<<DELIM`` blocks; the last value wins)."""
        values: dict[str, str] = {}
        lines = iter(self.output.read_text(encoding="utf-8").splitlines())
        for line in lines:
            if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
                name, delimiter = line.split("<<", 1)
                block = []
                for inner in lines:
                    if inner == delimiter:
                        break
                    block.append(inner)
                values[name] = "\n".join(block)
            else:
                name, value = line.split("=", 1)
                values[name] = value
        return values

    def report(self, capsys: pytest.CaptureFixture[str], results: RunResults, *argv: str) -> int:
        """Run ``lkeval report --results FILE argv...`` and return its exit code."""
        path = self.tmp / "results.json"
        write_results(results, path)
        capsys.readouterr()
        return main(["report", "--results", str(path), *argv])


@pytest.fixture
def actions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Actions]:
    for name in list(os.environ):
        if name.startswith(("GITHUB_", "LKEVAL_", "RUNNER_")):
            monkeypatch.delenv(name)
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps({"number": PR, "pull_request": {"number": PR, "head": {"sha": "abc123"}}})
    )
    summary, output = tmp_path / "summary.md", tmp_path / "output.txt"
    with github_server() as gh:
        env = {
            "GITHUB_ACTIONS": "true",
            "GITHUB_API_URL": gh.base_url,
            "GITHUB_SERVER_URL": "https://github.example",
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_EVENT_NAME": "pull_request",
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_SHA": "merge999",
            "GITHUB_RUN_ID": "4242",
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_OUTPUT": str(output),
            "GITHUB_TOKEN": gh.token,
            "LKEVAL_GITHUB_TIMEOUT": "0.5",
        }
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        yield Actions(gh, tmp_path, summary, output)


def passing() -> RunResults:
    return results_of(scenario("a"), scenario("b"))


def mine(gh: FakeGitHub, comment_id: str = "default") -> list[dict[str, object]]:
    tag = f"<!-- lk-eval:{comment_id} -->"
    return [c for c in gh.comments_of(REPO, PR) if str(c["body"]).startswith(tag)]


# --- the sticky comment ------------------------------------------------------------------------


def test_comment_created_then_updated_in_place_on_page_3(
    actions: Actions, capsys: pytest.CaptureFixture[str]
) -> None:
    gh = actions.gh
    gh.add_comments(REPO, PR, ["> <!-- lk-eval:default -->\n> quoted by a human"])
    gh.add_comments(REPO, PR, [f"review note {i}" for i in range(209)])
    assert actions.report(capsys, run_results()) == 1
    (first,) = mine(gh)
    assert "❌ gate failed" in str(first["body"])
    assert str(first["html_url"]) in capsys.readouterr().out

    gh.add_comments(REPO, PR, [f"later note {i}" for i in range(39)])
    comments = gh.comments_of(REPO, PR)
    assert len(comments) == 250 and comments.index(first) == 210  # on page 3 of 100 each
    gh.requests.clear()

    assert actions.report(capsys, passing()) == 0
    (updated,) = mine(gh)
    assert updated["id"] == first["id"] and "✅ gate passed" in str(updated["body"])
    assert len(gh.comments_of(REPO, PR)) == 250
    lists = [r for r in gh.requests if r.method == "GET" and r.path.endswith("/comments")]
    assert [r.query.get("page", ["1"])[0] for r in lists] == ["1", "2", "3"]
    assert all(r.query["per_page"] == ["100"] for r in lists)
    assert [r.method for r in gh.requests if r.method != "GET"] == ["PATCH"]
    assert gh.requests[-1].headers["Authorization"] == f"Bearer {gh.token}"
    assert actions.outputs()["comment-url"] == updated["html_url"]


def test_two_comment_ids_keep_two_comments(
    actions: Actions, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(2):
        actions.report(capsys, passing(), "--comment-id", "voice")
        actions.report(capsys, run_results(), "--comment-id", "chat")
    assert len(gh_comments := actions.gh.comments_of(REPO, PR)) == 2
    assert len(mine(actions.gh, "voice")) == 1 and len(mine(actions.gh, "chat")) == 1
    assert "✅" in str(mine(actions.gh, "voice")[0]["body"])
    assert "❌" in str(mine(actions.gh, "chat")[0]["body"])
    assert all(str(c["body"]).count("<!-- lk-eval:") == 1 for c in gh_comments)


def test_mode_new_posts_every_time_and_off_posts_nothing(
    actions: Actions, capsys: pytest.CaptureFixture[str]
) -> None:
    actions.report(capsys, passing(), "--comment", "new")
    actions.report(capsys, passing(), "--comment", "new")
    assert len(mine(actions.gh)) == 2
    assert not any(r.method == "GET" for r in actions.gh.requests)  # no need to look
    actions.gh.requests.clear()
    actions.report(capsys, passing(), "--comment", "off")
    assert actions.gh.requests == [] and len(mine(actions.gh)) == 2


@pytest.mark.parametrize("results, code", [(run_results(), 1), (passing(), 0)])
def test_403_from_a_fork_is_a_warning_and_the_gate_decides(
    actions: Actions, capsys: pytest.CaptureFixture[str], results: RunResults, code: int
) -> None:
    actions.gh.fault = "403"
    assert actions.report(capsys, results) == code
    out = capsys.readouterr().out
    (warn,) = [line for line in out.splitlines() if line.startswith("::warning::")]
    assert "403 Resource not accessible by integration" in warn
    assert "workflow_run" in warn  # the hint on what to do about it
    assert actions.outputs()["gate"] == ("pass" if code == 0 else "fail")
    assert actions.outputs()["comment-url"] == ""
    assert "lk-eval" in actions.summary.read_text(encoding="utf-8")


def test_500_is_retried_once_then_a_warning(
    actions: Actions, capsys: pytest.CaptureFixture[str]
) -> None:
    actions.gh.fault = "500"
    assert actions.report(capsys, passing()) == 0
    assert len(actions.gh.requests) == 2  # the list call, retried once
    out = capsys.readouterr().out
    assert "::warning::lk-eval could not post the PR comment: GET " in out
    assert ": 500 Server Error" in out


def test_500_only_once_recovers(actions: Actions, capsys: pytest.CaptureFixture[str]) -> None:
    actions.gh.fault, actions.gh.fault_methods = "500", ("POST",)
    # Every POST fails: 2 attempts, then a warning; GET listing still works.
    actions.report(capsys, passing())
    assert [r.method for r in actions.gh.requests] == ["GET", "POST", "POST"]
    assert mine(actions.gh) == []


def test_slow_github_is_a_warning_within_the_timeout(
    actions: Actions, capsys: pytest.CaptureFixture[str]
) -> None:
    actions.gh.fault, actions.gh.slow_seconds = "slow", 2.0
    assert actions.report(capsys, run_results()) == 1
    # one 0.5 s timeout, and a timeout is not retried: the first GET is the only request
    assert [r.method for r in actions.gh.requests] == ["GET"]
    out = capsys.readouterr().out
    assert "::warning::lk-eval could not post the PR comment: GET " in out
    assert "no answer within 0.5s" in out


def test_push_finds_the_pr_of_the_commit(
    actions: Actions, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_EVENT_NAME", "push")
    monkeypatch.setenv("GITHUB_SHA", "abc123")
    actions.gh.pulls_by_sha["abc123"] = [
        {"number": 3, "state": "closed"},
        {"number": PR, "state": "open"},
    ]
    actions.report(capsys, passing())
    assert len(mine(actions.gh)) == 1
    assert actions.gh.requests[0].path == f"/repos/{REPO}/commits/abc123/pulls"


def test_push_without_pr_posts_nothing(
    actions: Actions, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_EVENT_NAME", "push")
    assert actions.report(capsys, passing()) == 0
    assert "not a pull request; no PR comment" in capsys.readouterr().out
    assert [r.method for r in actions.gh.requests] == ["GET"]


def test_workflow_run_recipe_comments_on_the_pr_given(
    actions: Actions, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    event = actions.tmp / "run.json"
    run_url = "https://github.example/acme/hotel/actions/runs/99"
    event.write_text(json.dumps({"workflow_run": {"html_url": run_url, "pull_requests": []}}))
    monkeypatch.setenv("GITHUB_EVENT_NAME", "workflow_run")
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    actions.report(capsys, run_results(), "--pr", str(PR))
    (comment,) = mine(actions.gh)
    assert f"[Full results and artifacts]({run_url})" in str(comment["body"])


def test_no_token_is_a_warning(
    actions: Actions, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN")
    assert actions.report(capsys, passing()) == 0
    assert "::warning::lk-eval: no GitHub token" in capsys.readouterr().out
    assert actions.gh.requests == []


def test_comment_over_the_size_limit_is_trimmed(
    actions: Actions, capsys: pytest.CaptureFixture[str]
) -> None:
    transcript = tuple(msg(1, "user", "word " * 100) for _ in range(3))
    many = [
        scenario(
            f"scenario {i}",
            "failed",
            reason="the judge disagreed " * 15,
            attempts=(Attempt("failed", transcript=transcript, verdicts=verdicts_for("failed")),),
        )
        for i in range(300)
    ]
    actions.report(capsys, results_of(*many))
    (comment,) = mine(actions.gh)
    body = str(comment["body"])
    assert 50_000 < len(body) <= 65_536
    assert "left out to fit; see the [full results](https://github.example/acme/hotel/" in body
    summary = actions.summary.read_text(encoding="utf-8")
    assert len(summary) > len(body)  # the summary has 1 MiB to fill
    assert len(summary.encode()) <= 1024 * 1024


# --- summary, outputs, annotations -------------------------------------------------------------


def test_summary_outputs_and_files_written(
    actions: Actions, capsys: pytest.CaptureFixture[str]
) -> None:
    junit, markdown = actions.tmp / "out" / "junit.xml", actions.tmp / "out" / "report.md"
    code = actions.report(capsys, run_results(), "--junit", str(junit), "--markdown", str(markdown))
    assert code == 1
    outputs = actions.outputs()
    assert {k: outputs[k] for k in ("gate", "passed", "failed", "errored", "skipped")} == {
        "gate": "fail",
        "passed": "2",
        "failed": "2",
        "errored": "1",
        "skipped": "1",
    }
    assert outputs["quarantined"] == "1" and outputs["pass-rate"] == "0.4"
    assert outputs["regressions"] == "0" and outputs["exit-code"] == "1"
    assert outputs["results-path"] == str(actions.tmp / "results.json")
    assert outputs["junit-path"] == str(junit)
    assert outputs["reasons"].splitlines()[0].startswith("3 scenarios failed or errored")
    assert "<<ghadelimiter_" in actions.output.read_text()
    assert junit.read_text().startswith('<?xml version="1.0" encoding="UTF-8"?>')
    assert markdown.read_text().startswith("## lk-eval: ❌ gate failed")
    summary = actions.summary.read_text(encoding="utf-8")
    assert summary.startswith("## lk-eval: ❌ gate failed")
    assert "https://github.example/acme/hotel/actions/runs/4242" in summary
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith("lk-eval gate: FAILED (exit 1) — 3 scenarios failed")


def test_no_summary_flag(actions: Actions, capsys: pytest.CaptureFixture[str]) -> None:
    actions.report(capsys, passing(), "--no-summary")
    assert not actions.summary.exists() and actions.outputs()["gate"] == "pass"


def test_annotations_capped_at_ten_with_a_note_in_the_summary(
    actions: Actions, capsys: pytest.CaptureFixture[str]
) -> None:
    failing = [scenario(f"s{i}", "failed", reason=f"why {i}", line=i + 1) for i in range(14)]
    actions.report(capsys, results_of(*failing))
    errors = [line for line in capsys.readouterr().out.splitlines() if line.startswith("::error")]
    assert len(errors) == 10
    assert "4 more failing scenario(s) have no annotation" in actions.summary.read_text()


# --- baseline and gate flags -----------------------------------------------------------------


def test_baseline_regression_fixed_new_removed(
    actions: Actions, capsys: pytest.CaptureFixture[str]
) -> None:
    base = actions.tmp / "baseline.json"
    write_results(baseline_results(), base)
    code = actions.report(capsys, run_results(), "--baseline", str(base), "--fail-on", "regression")
    assert code == 1
    assert actions.outputs()["regressions"] == "1"
    body = str(mine(actions.gh)[0]["body"])
    assert "1 regressed, 1 fixed, 1 new, 1 removed vs baseline" in body
    for row in (
        "Cancel a booking | Room booking | 1 | 0 |  | $0.0025 | 🔻 regression",
        "🟢 fixed",
        "🆕 new",
    ):
        assert row in body
    assert "| ➖ | Parking question |" in body
    gate_line = capsys.readouterr().out.splitlines()[-1]
    assert "1 scenario regressed vs the baseline: Cancel a booking" in gate_line

    # Without the regression, the new scenario's error still blocks: main never showed it
    # failing (this test used to expect a pass here: a new scenario's failure waved through).
    passing_attempt = Attempt("passed", verdicts=verdicts_for("passed"))
    fixed = replace(FAILED, status="passed", attempts=(passing_attempt,))
    now = run_results()
    now = replace(now, scenarios=tuple(fixed if s is FAILED else s for s in now.scenarios))
    assert actions.report(capsys, now, "--baseline", str(base), "--fail-on", "regression") == 1
    assert "1 new scenario failed or errored: Late check-out" in actions.outputs()["reasons"]
    # Without it too, only failures the baseline had are left: they do not block.
    booted = replace(ERRORED, status="passed", attempts=(passing_attempt,))
    now = replace(now, scenarios=tuple(booted if s is ERRORED else s for s in now.scenarios))
    assert actions.report(capsys, now, "--baseline", str(base), "--fail-on", "regression") == 0
    assert "as in the baseline" in actions.outputs()["reasons"]


def test_fail_on_never_and_min_pass_rate(
    actions: Actions, capsys: pytest.CaptureFixture[str]
) -> None:
    assert actions.report(capsys, run_results(), "--fail-on", "never") == 0
    assert (
        actions.report(capsys, run_results(), "--fail-on", "never", "--min-pass-rate", "90%") == 1
    )
    assert "pass rate 40.0% is below the minimum 90.0%" in capsys.readouterr().out
    assert (
        actions.report(capsys, run_results(), "--fail-on", "never", "--min-pass-rate", "0.4") == 0
    )


def test_nothing_ran_exits_3(actions: Actions, capsys: pytest.CaptureFixture[str]) -> None:
    results = results_of(
        scenario("a", "error", reason="agent never booted"), scenario("b", "error")
    )
    assert actions.report(capsys, results) == 3
    assert "❌ nothing could run" in str(mine(actions.gh)[0]["body"])
    assert actions.outputs()["exit-code"] == "3"


def test_bad_baseline_is_exit_2(actions: Actions, capsys: pytest.CaptureFixture[str]) -> None:
    bad = actions.tmp / "bad.json"
    bad.write_text("{not json")
    assert actions.report(capsys, passing(), "--baseline", str(bad)) == 2
    err = capsys.readouterr().err
    assert "baseline:" in err and "bad.json:1: not valid JSON" in err
    with pytest.raises(BaselineError, match="no such results file"):
        resolve_baseline(ReportOptions(baseline=str(actions.tmp / "missing.json")))


def test_unwritable_report_is_exit_2(actions: Actions, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = actions.tmp / "file"
    blocker.write_text("")
    assert actions.report(capsys, passing(), "--junit", str(blocker / "junit.xml")) == 2
    assert f"{blocker / 'junit.xml'}" in capsys.readouterr().err


def test_missing_results_file_is_exit_2(
    actions: Actions, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["report", "--results", str(tmp_path / "nope.json")]) == 2
    assert "no such results file" in capsys.readouterr().err


def test_outside_github_nothing_is_posted(
    actions: Actions, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS")
    assert actions.report(capsys, run_results()) == 1
    out = capsys.readouterr().out
    assert actions.gh.requests == [] and not actions.summary.exists()
    assert "::" not in out and out.startswith("lk-eval gate: FAILED")
    # --github forces it on.
    actions.report(capsys, passing(), "--github")
    assert len(mine(actions.gh)) == 1


@pytest.mark.parametrize(
    ("text", "value"), [("0.9", 0.9), ("90%", 0.9), (" 100% ", 1.0), ("0", 0.0)]
)
def test_parse_pass_rate(text: str, value: float) -> None:
    assert parse_pass_rate(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["95", "-0.1", "abc", "120%"])
def test_parse_pass_rate_rejects(text: str) -> None:
    parser = argparse.ArgumentParser()
    add_report_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--min-pass-rate", text])


def test_comment_id_must_make_a_safe_marker() -> None:
    parser = argparse.ArgumentParser()
    add_report_arguments(parser)
    assert parser.parse_args(["--comment-id", "voice-agent.v2"]).comment_id == "voice-agent.v2"
    for bad in ("x -->", "a--b", ""):
        with pytest.raises(SystemExit):
            parser.parse_args(["--comment-id", bad])


# --- secrets -------------------------------------------------------------------------------------

SECRETS = {
    "OPENAI_API_KEY": "sk-proj-Zx81LmQ0aa",
    "LIVEKIT_API_SECRET": "lkSecret<&>Value",
    "SMTP_PASSWORD": "correct-horse-battery",
}


def test_no_secret_appears_in_any_output(
    actions: Actions, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    leak = " ".join(SECRETS.values())
    leaky = replace(
        FAILED,
        reason=f"judge: the agent read out {leak}",
        attempts=(
            replace(
                FAILED.attempts[0],
                transcript=(*FAILED.attempts[0].transcript, msg(1, "assistant", f"keys: {leak}")),
                log_tail=(f"OPENAI_API_KEY={SECRETS['OPENAI_API_KEY']}",),
            ),
        ),
    )
    errored = scenario("boom", "error", reason=f"crashed: {leak}")
    results = results_of(leaky, errored, scenario("fine"))
    junit, markdown = actions.tmp / "j.xml", actions.tmp / "r.md"
    actions.report(capsys, results, "--junit", str(junit), "--markdown", str(markdown))
    out = capsys.readouterr().out

    masked_lines = [line for line in out.splitlines() if line.startswith("::add-mask::")]
    assert {line.removeprefix("::add-mask::") for line in masked_lines} >= {
        *SECRETS.values(),
        actions.gh.token,
    }
    shown = "\n".join(line for line in out.splitlines() if not line.startswith("::add-mask::"))
    bodies = json.dumps([r.body for r in actions.gh.requests])
    texts = {
        "stdout": shown,
        "summary": actions.summary.read_text(encoding="utf-8"),
        "outputs": actions.output.read_text(encoding="utf-8"),
        "junit": junit.read_text(encoding="utf-8"),
        "markdown": markdown.read_text(encoding="utf-8"),
        "requests": bodies,
        "comment": str(mine(actions.gh)[0]["body"]),
    }
    for where, text in texts.items():
        for secret in (*SECRETS.values(), actions.gh.token, "lkSecret&lt;&amp;&gt;Value"):
            assert secret not in text, (where, secret)
    assert "***" in texts["comment"] and "***" in texts["junit"] and "***" in texts["stdout"]
    assert re.search(r"::error [^\n]*\*\*\*", shown)


# --- the judge preflight ------------------------------------------------------------------------


def test_a_judge_preflight_warning_is_an_annotation_and_an_output(
    actions: Actions, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 18.5: a judge that failed its canary was only a line in the log."""
    warning = (
        "the judge (j at h) passed the known-bad canary transcript (it answered pass, pass, "
        "pass) and the run went on only because of --allow-weak-judge"
    )
    check = JudgeCheck("pass", "pass", warning, ("pass",) * 3, ("pass",) * 3, weak=True)
    weak = passing()
    weak = replace(weak, metadata=replace(weak.metadata, judge_check=check))
    assert actions.report(capsys, weak) == 0
    out = capsys.readouterr().out
    assert f"::warning title=lk-eval%3A judge preflight::{warning}" in out.splitlines()
    assert actions.outputs()["judge-check"] == warning

    fine = replace(weak, metadata=replace(weak.metadata, judge_check=JudgeCheck("fail", "pass")))
    assert actions.report(capsys, fine) == 0
    assert "judge preflight" not in capsys.readouterr().out
    assert actions.outputs()["judge-check"] == "ok"
    assert actions.report(capsys, passing()) == 0
    assert actions.outputs()["judge-check"] == ""


def test_the_fake_github_is_quiet_when_a_client_resets(capfd: pytest.CaptureFixture[str]) -> None:
    """A cancelled request resets its connection: GitHub logs nothing, and a traceback from the
    fake (API or blob host) would land on the stderr a test reads as lk-eval's own."""
    with github_server() as gh:
        for url in (gh.base_url, gh.blob_url):
            port = int(url.rsplit(":", 1)[1])
            reset_then_ask(port, lambda url=url: httpx.get(f"{url}/nothing", timeout=30))
    assert "Traceback" not in capfd.readouterr().err
