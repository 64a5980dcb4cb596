"""Workflow commands, $GITHUB_OUTPUT/$GITHUB_STEP_SUMMARY files, the Actions context, progress."""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from report_fixtures import ERRORED, FAILED, results_of, run_results, scenario

from lkeval.publish.github.context import read_context
from lkeval.publish.github.workflow import (
    MAX_SUMMARY_BYTES,
    annotation_path,
    append_step_summary,
    error_annotations,
    format_outputs,
    group,
)
from lkeval.publish.progress import GitHubProgress, TerminalProgress, make_progress
from lkeval.results.model import Attempt, TurnMetrics, Usage
from lkeval.text.masking import register_secret
from lkeval.text.untrusted import add_mask_commands, command, escape_data, escape_property, inert


def test_escapes() -> None:
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    line = command("error", "two\nlines", file="evals/a,b.yaml", line=3, title="x: y")
    assert line == "::error file=evals/a%2Cb.yaml,line=3,title=x%3A y::two%0Alines"
    assert command("endgroup") == "::endgroup::"


def test_error_annotations_capped_at_ten() -> None:
    failing = [scenario(f"s{i}", "failed", reason=f"why {i}", line=i + 1) for i in range(13)]
    results = results_of(*failing, scenario("q", "failed", quarantined=True), scenario("ok"))
    lines, omitted = error_annotations(results)
    assert len(lines) == 10 and omitted == 3
    assert lines[0].startswith(
        "::error file=evals/bulk.yaml,line=1,title=lk-eval%3A s0 failed::why 0"
    )
    assert not any("title=lk-eval%3A q " in line for line in lines)


def test_annotation_message_is_one_command_line() -> None:
    lines, _ = error_annotations(results_of(FAILED, ERRORED))
    assert len(lines) == 2
    assert all("\n" not in line for line in lines)
    assert "%0Ajudge: fail" in lines[0]
    assert lines[1].startswith("::error file=evals/frontdesk.yaml,line=7,title=lk-eval%3A Late")


def test_annotation_path_relative_to_workspace() -> None:
    assert annotation_path("/ws/evals/a.yaml", "/ws") == "evals/a.yaml"
    assert annotation_path("evals/a.yaml", "/ws") == "evals/a.yaml"


def test_outputs_single_and_multiline() -> None:
    text = format_outputs({"passed": "3", "reasons": "one\ntwo"})
    assert text.startswith("passed=3\nreasons<<ghadelimiter_")
    m = re.search(r"reasons<<(\S+)\none\ntwo\n(\S+)\n$", text)
    assert m and m[1] == m[2]


def test_add_mask_commands() -> None:
    register_secret("secret-one", "secret-two-longer", "pw##[as-it-is")
    assert add_mask_commands() == [
        "::add-mask::secret-two-longer",
        "::add-mask::pw##[as-it-is",  # exact: the runner must hide this very value
        "::add-mask::secret-one",
    ]


def test_group_and_inert() -> None:
    stream = io.StringIO()
    with group(stream, "title, with: stuff"):
        stream.write("inside\n")
    assert stream.getvalue() == "::group::title, with: stuff\ninside\n::endgroup::\n"
    wrapped = inert(["::set-output name=x::y"])
    token = wrapped[0].removeprefix("::stop-commands::")
    assert wrapped[-1] == f"::{token}::" and len(token) > 20


def test_step_summary_never_over_one_mebibyte(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    path.write_text("x" * 1000)
    append_step_summary(path, "é" * MAX_SUMMARY_BYTES)
    assert path.stat().st_size <= MAX_SUMMARY_BYTES
    path.read_text(encoding="utf-8")  # no split character


def _event(tmp_path: Path, payload: Mapping[str, object]) -> str:
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload))
    return str(path)


def test_context_of_a_pull_request(tmp_path: Path) -> None:
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_REPOSITORY": "acme/hotel",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": _event(
            tmp_path, {"number": 7, "pull_request": {"number": 7, "head": {"sha": "abc123"}}}
        ),
        "GITHUB_SHA": "merge999",
        "GITHUB_RUN_ID": "55",
        "GITHUB_TOKEN": "ghs_tokentoken",
    }
    ctx = read_context(env)
    assert ctx.actions and ctx.pr_number == 7
    assert (ctx.sha, ctx.head_sha) == ("merge999", "abc123")
    assert ctx.api_url == "https://api.github.com"
    assert ctx.run_url == "https://github.com/acme/hotel/actions/runs/55"
    assert ctx.token == "ghs_tokentoken" and "ghs_tokentoken" not in repr(ctx)
    assert read_context(env, token="flag-token").token == "flag-token"


def test_context_of_workflow_run_and_push(tmp_path: Path) -> None:
    payload = {
        "workflow_run": {
            "head_sha": "feed",
            "html_url": "https://github.com/acme/hotel/actions/runs/9",
            "pull_requests": [],
        }
    }
    env = {"GITHUB_EVENT_NAME": "workflow_run", "GITHUB_EVENT_PATH": _event(tmp_path, payload)}
    ctx = read_context(env, pr_number=12)
    assert ctx.pr_number == 12 and ctx.head_sha == "feed"
    assert ctx.run_url == "https://github.com/acme/hotel/actions/runs/9"
    push = read_context({"GITHUB_EVENT_NAME": "push", "GITHUB_SHA": "beef"})
    assert push.pr_number is None and push.head_sha == "beef"
    broken = read_context({"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": "/nope"})
    assert broken.pr_number is None


def test_terminal_progress_lines() -> None:
    stream = io.StringIO()
    progress = make_progress(stream, github=False, total=7)
    assert isinstance(progress, TerminalProgress)
    for s in run_results().scenarios:
        progress.scenario_started(s.scenario_id, s.label)
        progress.scenario_finished(s)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "[1/7] ✓ Simple room booking (3.2s)"  # compact in CI: no clock
    assert lines[2] == (
        "[3/7] ✗ Suite booking (repeated) (6.0s, 2/3 runs passed, needs 3)"
        " — judge fail: The agent booked a standard room instead."
    )
    assert lines[3] == (
        "[4/7] ! Late check-out (12.0s) — agent crashed before connecting (job crashed)"
    )
    assert lines[5] == "[6/7] - Spa appointment (0.0s) — not selected by --tags feature=rooms"
    assert lines[4].startswith("[5/7] ✗ Greets by name (1.5s, quarantined) — judge fail")
    assert len(lines) == 7  # one line per scenario


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_progress_counts_with_the_elapsed_time_on_a_tty() -> None:
    stream = _Terminal()
    progress = make_progress(stream, github=False, total=2)
    progress.scenario_finished(run_results().scenarios[0])
    assert stream.getvalue() == "[1/2 · 0:00] ✓ Simple room booking (3.2s)\n"


def _until(predicate: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + 10
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)
    return predicate()


def test_a_quiet_terminal_shows_a_status_line_redrawn_in_place() -> None:
    stream = _Terminal()
    progress = TerminalProgress(stream, total=3, status_every=0.05)
    scenarios = run_results().scenarios
    for s in scenarios[:2]:
        progress.scenario_started(s.scenario_id, s.label)
    assert _until(lambda: "2 running, 1 waiting, 0 of 3 decided" in stream.getvalue())
    assert stream.getvalue().startswith("\r\x1b[K… 2 running")  # in place: no newline
    assert "\n" not in stream.getvalue()
    progress.scenario_finished(scenarios[0])
    # the status line is wiped before the scenario's own line
    assert "\r\x1b[K[1/3 · 0:00] ✓ Simple room booking (3.2s)\n" in stream.getvalue()
    assert _until(lambda: "1 running, 1 waiting, 1 of 3 decided" in stream.getvalue())


def test_a_quiet_ci_log_gets_a_status_line_of_its_own_and_none_when_idle() -> None:
    stream = io.StringIO()
    progress = make_progress(stream, github=True, total=2)
    assert isinstance(progress, GitHubProgress)
    progress._out.status_every = 0.05
    first = run_results().scenarios[0]
    time.sleep(0.2)
    assert stream.getvalue() == ""  # nothing runs yet: nothing to say
    progress.scenario_started(first.scenario_id, first.label)
    assert _until(lambda: "… 1 running, 1 waiting, 0 of 2 decided · 0:00\n" in stream.getvalue())
    assert "\r" not in stream.getvalue()  # a log keeps lines, it cannot redraw
    progress.scenario_finished(first)
    seen = stream.getvalue()
    time.sleep(0.3)
    assert stream.getvalue() == seen  # nothing running: silence is honest


def test_a_scenarios_line_shows_its_latency_and_cost() -> None:
    turns = tuple(TurnMetrics(i, latency_ms=100.0 * i) for i in range(1, 5))
    usage = {"agent": Usage(100, 10, 0.0021, ("gpt-4.1-mini",))}
    measured = scenario("Timed", attempts=(Attempt("passed", turns=turns, usage=usage),))
    stream = io.StringIO()
    make_progress(stream, github=False, total=1).scenario_finished(measured)
    assert stream.getvalue() == "[1/1] ✓ Timed (1.0s, 4 turns, p95 400 ms, $0.0021)\n"


def test_github_progress_groups() -> None:
    stream = io.StringIO()
    progress = make_progress(stream, github=True, total=3)
    assert isinstance(progress, GitHubProgress)
    progress.scenario_finished(FAILED)
    out = stream.getvalue().splitlines()
    assert out[0] == "::group::[1/3] ✗ Cancel a booking (4.5s)"
    assert out[-1] == "::endgroup::"
    assert out[1].startswith("::stop-commands::") and out[-2] == f"::{out[1][17:]}::"
    assert "  agent veto: fail — booking GH-1042 still active" in out
    assert any("→ call cancel_booking" in line for line in out)


def test_annotation_path_from_a_working_directory_below_the_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "agent").mkdir()
    monkeypatch.chdir(tmp_path / "agent")  # the Action's working-directory: agent/
    assert annotation_path("scenarios.yaml", str(tmp_path)) == "agent/scenarios.yaml"
