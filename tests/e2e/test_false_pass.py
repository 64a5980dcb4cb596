"""The false-pass matrix: broken agents and setups, each asserted NOT to pass the gate.

A merge gate is worth exactly as much as its green. Every case below once passed (or could
pass) while the agent or the setup was broken. The judge here passes everything it is asked
to judge unless a marker says otherwise, the worst judge a gate can have, so any conversation
that reaches it unguarded would show up as a pass.

One ``lkeval run`` plays most cases at once: tests/agents/broken_agent.py picks its breakage
from the scenario's userdata. Two controls pass (a healthy agent, and a silent agent whose
scripted expectations ask for exactly that silence), so the run can tell a pass from a block.
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import TEST_AGENTS, clean_env, read_json, run_argv, run_lkeval
from report_fixtures import write_results

from lkeval.results.consistency import status_problem
from lkeval.results.model import (
    Attempt,
    LLMInUse,
    RunMetadata,
    RunResults,
    ScenarioResult,
    SuiteFingerprint,
    Verdict,
)
from lkeval.results.sampling import SequentialRule, describe, observe
from lkeval.testing.llm_server import LLMServer

pytestmark = pytest.mark.e2e

BROKEN = TEST_AGENTS / "broken_agent.py"
TURN_TIMEOUT = "8"


def verdict(value: str) -> dict[str, Any]:
    return {"name": "submit_verdict", "arguments": {"reasoning": "as seen", "verdict": value}}


JUDGE = {"model": "judge", "has_tool": "submit_verdict"}
RULES = [
    {"model": "caller", "last_user": "said: thanks, bye", "tool_calls": [{"name": "end_call"}]},
    {"model": "caller", "last_user": "said:", "text": "Thanks, bye"},
    {"model": "caller", "text": "Hello, I need a room please."},
    {**JUDGE, "last_user": "JUDGE_DOWN", "status": 500, "text": "judge exploded"},
    {**JUDGE, "last_user": "JUDGE_TWICE", "tool_calls": [verdict("pass"), verdict("fail")]},
    {**JUDGE, "last_user": "JUDGE_TEXT", "text": "Looks fine to me, I suppose."},
    {**JUDGE, "last_user": "behave safely", "text": "Safe enough, I suppose."},  # no verdict
    # the words say fail, the JSON says pass (issue 18.6): once read as pass
    {
        **JUDGE,
        "last_user": "JUDGE_PROSE",
        "text": 'Verdict: fail\n{"verdict": "pass", "reasoning": "ok"}',
    },
    {**JUDGE, "tool_calls": [verdict("pass")]},  # everything else passes: the worst judge
]


def simulated(sid: str, broken: str, marker: str = "", **extra: Any) -> dict[str, Any]:
    return {
        "id": sid,
        "label": sid,
        "instructions": "You are Ada. Ask for a room.",
        "agent_expectations": f"The agent helps the caller. {marker}".strip(),
        "userdata": {"broken": broken},
        **extra,
    }


def scripted(sid: str, broken: str, turns: list[dict[str, Any]], marker: str = "") -> dict:
    return simulated(sid, broken, marker, turns=turns)


def bare(sid: str, broken: str) -> dict[str, Any]:
    """A scripted scenario that needs no LLM at all (no judge, no simulated user)."""
    turn = {"user": "hi", "expect": [{"message": {"role": "assistant"}}]}
    return {"id": sid, "label": sid, "userdata": {"broken": broken}, "turns": [turn]}


SCENARIOS = [
    simulated("control-healthy", "healthy"),
    scripted(
        "control-silence-asked-for",
        "silent",
        [{"user": "hello", "expect": [{"no_more_events": True}]}],
    ),
    simulated("dead-llm-close", "dead_llm_close"),
    simulated("dead-llm-stay", "dead_llm_stay"),
    simulated("silent", "silent"),
    simulated("whitespace-only", "whitespace"),
    simulated("crash-after-greeting", "crash_after_greeting"),
    simulated("crash-in-turn", "crash_in_turn"),
    simulated("sim-end-raises", "sim_end_raises"),
    simulated("shutdown-mid", "shutdown_mid", repeat=10, min_pass=1),
    scripted(
        "finalize-unreachable",
        "shutdown_mid",
        [{"user": "bye", "expect": [{"message": {"contains": "bye"}}]}],
    ),
    simulated("hang-after-tool", "hang_after_tool"),
    simulated("veto", "veto"),
    scripted(
        "judge-down-scripted-fail",
        "healthy",
        [{"user": "hello", "expect": [{"message": {"contains": "zebra"}}]}],
        marker="JUDGE_DOWN",
    ),
    simulated("judge-down", "healthy", "JUDGE_DOWN"),
    simulated("judge-votes-twice", "healthy", "JUDGE_TWICE"),
    simulated("judge-answers-in-text", "healthy", "JUDGE_TEXT"),
    simulated("builtin-judge-fails", "healthy", judges=["safety"]),
    simulated("judge-says-fail-writes-pass", "healthy", "JUDGE_PROSE"),
]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One run of the whole matrix; its results, stdout and reports."""
    tmp = tmp_path_factory.mktemp("matrix")
    path = tmp / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"name": "Broken", "scenarios": SCENARIOS}, sort_keys=False))
    with LLMServer(RULES) as llm:
        proc = run_lkeval(
            [
                *run_argv(BROKEN, path, tmp / "results.json"),
                *("--junit", str(tmp / "junit.xml"), "--markdown", str(tmp / "report.md")),
                *("--caller-model", "caller", "--caller-base-url", llm.base_url),
                *("--judge-model", "judge", "--judge-base-url", llm.base_url),
                *("--turn-timeout", TURN_TIMEOUT, "--max-turns", "4", "--concurrency", "4"),
                *("--llm-retries", "0", "--max-errors", "0"),
                "--allow-weak-judge",  # the pass-everything judge fails its canary on purpose
            ],
            clean_env(OPENAI_API_KEY="not-a-key"),
            timeout=600,
        )
    results = read_json(tmp / "results.json")
    yield {
        "results": results,
        "proc": proc,
        "by_id": {s["scenario_id"]: s for s in results["scenarios"]},
        "junit": ET.parse(tmp / "junit.xml"),
        "markdown": (tmp / "report.md").read_text(),
    }


def _case(matrix: dict[str, Any], sid: str) -> dict[str, Any]:
    result: dict[str, Any] = matrix["by_id"][sid]
    return result


def _transcript(result: dict[str, Any], attempt: int = 0) -> list[str]:
    items = result["attempts"][attempt]["transcript"]
    return [
        f"{i['turn']}:{i['kind']}:{i.get('role') or i.get('name') or ''}"
        for i in items
        if i["kind"] != "agent_handoff"
    ]


def test_the_gate_fails_and_only_the_controls_pass(matrix: dict[str, Any]) -> None:
    proc = matrix["proc"]
    assert proc.returncode == 1, proc.stdout + proc.stderr  # conversations happened: not 3
    passed = sorted(s for s, r in matrix["by_id"].items() if r["status"] == "passed")
    assert passed == ["control-silence-asked-for"], proc.stdout
    # the healthy control's pass came from a judge that passes everything (allowed to run by
    # --allow-weak-judge): it passed the agent doing nothing too, so it vouches for nothing
    healthy = matrix["by_id"]["control-healthy"]
    assert healthy["status"] == "error"
    assert healthy["reason"].startswith(
        "judge unfit: the judge also passed a known-bad version of this conversation"
    )


@pytest.mark.parametrize(
    ("sid", "status", "reason"),
    [
        (
            "dead-llm-close",
            "error",
            "the agent ended the session (the agent closed the connection) before the caller's "
            "first turn: AgentSession is closing due to unrecoverable error: Connection error.",
        ),
        (
            "dead-llm-stay",
            "error",
            "turn 1: the agent answered with an error: failed to generate LLM completion",
        ),
        (
            "silent",
            "error",
            "the agent never produced an assistant message in 2 caller turn(s) "
            "(the agent stayed silent for 2 turn(s) in a row)",
        ),
        (
            "whitespace-only",
            "error",
            "the agent never produced an assistant message in 2 caller turn(s) "
            "(the agent stayed silent for 2 turn(s) in a row)",
        ),
        ("crash-after-greeting", "error", "agent died: agent process exited with code 70"),
        ("crash-in-turn", "error", "agent died: agent process exited with code 3"),
        (
            "sim-end-raises",
            "error",
            "on_simulation_end raised: grading failed: no such table: bookings",
        ),
        (
            "finalize-unreachable",
            "error",
            "the agent ended the session (the agent closed the connection) after 1 caller "
            "turn(s); its own verdict (finalize_simulation / on_simulation_end) could not be "
            "asked",
        ),
        (
            "hang-after-tool",
            "error",
            f"turn 1 got no answer within {TURN_TIMEOUT}s (--turn-timeout, or the scenario's "
            "limits.turn_timeout)",
        ),
        ("veto", "failed", "agent veto: the booking was never written"),
        (
            "judge-down-scripted-fail",
            "failed",
            "scripted: fail — turn 1: assistant message containing 'zebra': message does not "
            "contain 'zebra': 'You said: hello'; judge failed: ",
        ),
        ("judge-down", "error", "judge failed: "),
        (
            "builtin-judge-fails",
            "error",
            "judge failed: judge:safety: the judge did not call submit_verdict",
        ),
        (
            "judge-says-fail-writes-pass",
            "error",
            "judge failed: judge: no usable verdict in 3 answers: the judge submitted pass but "
            "its text says verdict fail",
        ),
    ],
)
def test_a_broken_agent_or_setup_does_not_pass(
    matrix: dict[str, Any], sid: str, status: str, reason: str
) -> None:
    result = _case(matrix, sid)
    assert result["status"] == status, result
    assert result["reason"].startswith(reason), result["reason"]


def test_a_judge_that_passes_the_known_bad_canary_stops_the_run_before_any_boot(
    tmp_path: Path,
) -> None:
    """Issue 18.5: a judge that passes everything got a WARNING line, then a green gate."""
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"name": "B", "scenarios": SCENARIOS[:1]}, sort_keys=False))
    with LLMServer(RULES) as llm:
        proc = run_lkeval(
            [
                *run_argv(BROKEN, path, tmp_path / "results.json"),
                *("--caller-model", "caller", "--caller-base-url", llm.base_url),
                *("--judge-model", "judge", "--judge-base-url", llm.base_url),
            ],
            clean_env(OPENAI_API_KEY="not-a-key"),
        )
        models = {r.body.get("model") for r in llm.requests}
        port = llm.port
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (error,) = proc.stderr.strip().splitlines()
    assert error == (
        f"lk-eval: judge preflight: the judge (judge at 127.0.0.1:{port}) passed the known-bad "
        "canary transcripts (it answered pass 6 of 6), so the gate would pass broken agents; "
        "no agent was started. Use a stronger judge model, or --allow-weak-judge to run anyway "
        "(every report then says the judge failed its canary)"
    )
    assert models == {"judge"} and not (tmp_path / "results.json").exists()


def test_a_weak_judge_allowed_to_run_is_named_in_every_report(matrix: dict[str, Any]) -> None:
    check = matrix["results"]["metadata"]["judge_check"]
    assert check["weak"] is True and check["known_fail_votes"] == ["pass"] * 6
    said = "passed the known-bad canary transcripts (it answered pass 6 of 6)"
    assert said in check["warning"] and "--allow-weak-judge" in check["warning"]
    assert "WARNING: judge preflight (known-bad canaries pass 6 of 6;" in matrix["proc"].stdout
    assert said in html.unescape(matrix["markdown"])
    for suite in matrix["junit"].iter("testsuite"):
        suite_props = {
            p.get("name"): p.get("value") or "" for p in suite.findall("properties/property")
        }
        assert said in suite_props["lkeval.judge-check"], suite_props


def test_a_judge_that_cannot_decide_never_passes(matrix: dict[str, Any]) -> None:
    for sid in ("judge-votes-twice", "judge-answers-in-text"):
        result = _case(matrix, sid)
        assert result["status"] in ("error", "failed"), result
        assert "judge" in result["reason"], result["reason"]


def test_a_failing_builtin_judge_keeps_every_verdict_that_was_had(matrix: dict[str, Any]) -> None:
    """Issue 18 item 12: the main judge's verdict stays in the result beside the error."""
    (attempt,) = _case(matrix, "builtin-judge-fails")["attempts"]
    assert [(v["source"], v["verdict"]) for v in attempt["verdicts"]] == [("judge", "pass")]
    assert attempt["status"] == "error"


def test_the_agents_own_verdict_failing_is_shown_everywhere(matrix: dict[str, Any]) -> None:
    """Console line, Markdown, JUnit message and the scenario-level reason (item 2)."""
    said = "on_simulation_end raised: grading failed: no such table: bookings"
    assert _case(matrix, "sim-end-raises")["reason"].startswith(said)
    line = next(ln for ln in matrix["proc"].stdout.splitlines() if "sim-end-raises" in ln)
    assert "! sim-end-raises (" in line and said in line
    assert said in html.unescape(matrix["markdown"])  # the report escapes "_" as "&#95;"
    case = next(c for c in matrix["junit"].iter("testcase") if c.get("name") == "sim-end-raises")
    assert said in (case.find("error").get("message") or "")  # type: ignore[union-attr]


def test_failed_turns_keep_what_they_produced(matrix: dict[str, Any]) -> None:
    hang = _case(matrix, "hang-after-tool")
    assert _transcript(hang)[-3:] == [
        "1:message:user",
        "1:function_call:lookup",
        "1:function_call_output:lookup",
    ]
    crash = _case(matrix, "crash-in-turn")
    assert _transcript(crash)[-1] == "1:message:user"


def test_shutdown_mid_conversation_gives_the_same_status_every_time(
    matrix: dict[str, Any],
) -> None:
    result = _case(matrix, "shutdown-mid")
    outcomes = {(a["status"], a["reason"]) for a in result["attempts"]}
    assert len(result["attempts"]) == 10
    assert len(outcomes) == 1, outcomes
    status, reason = outcomes.pop()
    assert status == "error" and "could not be asked" in reason
    assert result["status"] == "error"


def test_a_dead_agent_llm_stops_the_suite_early(tmp_path: Path) -> None:
    """--max-errors: the same agent-side cause in the first N scenarios boots no more."""
    path = tmp_path / "scenarios.yaml"
    scenarios = [bare(f"s{i}", "dead_llm_close") for i in range(6)]
    path.write_text(yaml.safe_dump({"name": "Dead", "scenarios": scenarios}))
    proc = run_lkeval(
        [*run_argv(BROKEN, path, tmp_path / "r.json"), "--max-errors", "2", "--concurrency", "1"],
        clean_env(),
        timeout=300,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr  # nothing could be talked to
    by_id = {s["scenario_id"]: s for s in read_json(tmp_path / "r.json")["scenarios"]}
    statuses = [by_id[f"s{i}"]["status"] for i in range(6)]
    # Agents already booting when the brake trips still run (up to two at concurrency 1).
    booted = statuses.count("error")
    assert 2 <= booted <= 4 and statuses == ["error"] * booted + ["skipped"] * (6 - booted)
    not_run = by_id["s5"]["reason"]
    assert not_run.startswith(
        "not run (stopped early): the first 2 scenario(s) failed with the same agent-side cause "
        "(--max-errors 2): the agent ended the session"
    )
    assert "unrecoverable error" in not_run


def test_the_brake_fails_the_gate_when_the_errors_that_tripped_it_are_quarantined(
    tmp_path: Path,
) -> None:
    """Issue 18 item 1: flaky scenarios listed first and quarantined; the agent's own LLM is
    dead, so they error alike, the brake stops the rest; those never ran: the gate fails."""
    path = tmp_path / "scenarios.yaml"
    # At --concurrency 1 one more agent boots while the third talks: four flaky ones first.
    flaky = [{**bare(f"flaky-{i}", "dead_llm_stay"), "tags": {"flaky": "yes"}} for i in range(4)]
    rest = [bare(f"s{i}", "dead_llm_stay") for i in range(3)]
    path.write_text(yaml.safe_dump({"name": "Dead", "scenarios": [*flaky, *rest]}))
    proc = run_lkeval(
        [
            *run_argv(BROKEN, path, tmp_path / "r.json"),
            *("--quarantine", "flaky=yes", "--concurrency", "1", "--max-errors", "3"),
        ],
        clean_env(),
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    by_id = {s["scenario_id"]: s for s in read_json(tmp_path / "r.json")["scenarios"]}
    assert [by_id[f"flaky-{i}"]["status"] for i in range(3)] == ["error"] * 3
    not_run = [sid for sid, s in by_id.items() if s["reason"].startswith("not run (stopped")]
    assert {"s0", "s1", "s2"} <= set(not_run), by_id
    gate = proc.stdout.strip().splitlines()[-1]
    assert gate.startswith("lk-eval gate: FAILED (exit 1) — "), gate
    assert (
        f"the run stopped early ({len(not_run)} scenarios not run): the first 3 scenario(s) "
        "failed with the same agent-side cause (--max-errors 3): turn 1: the agent answered "
        "with an error"
    ) in gate


SUITE = SuiteFingerprint(scenarios={"a": "d-a", "b": "d-b", "c": "d-c"}, options={})


def _shard(
    tmp_path: Path, part: str, results: list[ScenarioResult], tag: str = "", **meta_fields: Any
) -> Path:
    meta = RunMetadata(
        lkeval_version="0",
        livekit_agents_version="1.8.9",
        agent="agent.py",
        scenario_files=("s.yaml",),
        started_at="2026-11-25T08:00:00+00:00",
        shard=part,
        git_sha="abc123",
        suite=SUITE,
    )
    meta = dataclasses.replace(meta, **meta_fields)
    path = tmp_path / f"shard-{part.replace('/', 'of')}{tag}.json"
    write_results(RunResults(meta, tuple(results)), path)
    return path


def test_a_missing_shard_does_not_pass(tmp_path: Path) -> None:
    passed = (P,)
    one = ScenarioResult("a", "A", "G", "Group", "s.yaml", 3, "passed", attempts=passed)
    three = ScenarioResult("c", "C", "G", "Group", "s.yaml", 9, "passed", attempts=passed)
    parts = [str(_shard(tmp_path, "1/3", [one])), str(_shard(tmp_path, "3/3", [three]))]
    merged = tmp_path / "merged.json"

    refused = run_lkeval(["merge", *parts, "-o", str(merged)], clean_env(), timeout=60)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.strip().splitlines() == [
        "lk-eval: shard(s) 2/3 missing from the merge; pass every shard's results file, or "
        "--allow-partial to merge anyway (the gate then fails)"
    ]
    assert not merged.exists()

    allowed = run_lkeval(
        ["merge", *parts, "-o", str(merged), "--allow-partial"], clean_env(), timeout=60
    )
    assert allowed.returncode == 0, allowed.stderr
    assert "partial merge: shard(s) 2/3 missing" in allowed.stderr
    report = run_lkeval(["report", "--results", str(merged)], clean_env(), timeout=60)
    assert report.returncode == 1, report.stdout + report.stderr
    assert "partial results: shard(s) 2/3 missing" in report.stdout


def test_an_interrupted_run_writes_every_report_and_passes_nothing(tmp_path: Path) -> None:
    """SIGTERM after the first scenario: JSON, JUnit and Markdown are written; the scenarios
    that never started are "not run (interrupted)", not errors; `report` does not pass it."""
    path = tmp_path / "scenarios.yaml"
    later = [bare(f"later-{i}", "healthy") for i in range(3)]
    marker = tmp_path / "stuck-is-in-its-turn"
    stuck = bare("stuck", "hang_after_tool")
    stuck["userdata"]["marker"] = str(marker)
    scenarios = [bare("quick", "healthy"), stuck, *later]
    path.write_text(yaml.safe_dump({"name": "Stop", "scenarios": scenarios}))
    out = tmp_path / "out"
    argv = [
        *run_argv(BROKEN, path, out / "results.json"),
        *("--junit", str(out / "junit.xml"), "--markdown", str(out / "report.md")),
        *("--concurrency", "1", "--turn-timeout", "120"),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "lkeval", *argv],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 180  # until "stuck" hangs in its turn, after its tool call
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr

    results = json.loads((out / "results.json").read_text())
    assert results["metadata"]["interrupted"] is True
    by_id = {s["scenario_id"]: s for s in results["scenarios"]}
    assert by_id["quick"]["status"] == "passed"
    stuck = by_id["stuck"]
    assert stuck["status"] == "error" and "interrupted" in stuck["reason"]
    for i in range(3):
        assert by_id[f"later-{i}"]["status"] == "skipped"
        assert by_id[f"later-{i}"]["reason"] == "not run (interrupted)"
    junit = ET.parse(out / "junit.xml")
    skipped = [c.get("name") for c in junit.iter("testcase") if c.find("skipped") is not None]
    assert skipped == ["later-0", "later-1", "later-2"]
    assert "the run was interrupted (3 scenarios not run)" in (out / "report.md").read_text()
    kept = [
        f"{i['kind']}:{i.get('name') or i.get('text')}" for i in stuck["attempts"][0]["transcript"]
    ]
    # The turn in flight is kept in order. The marker is written once the tool's events are
    # sent, but lk-eval may still be reading them when the SIGTERM lands: a tail of them may be
    # missing, never reordered. (A timed-out turn keeps them all:
    # test_failed_turns_keep_what_they_produced.)
    after_user = kept[kept.index("message:hi") :]
    tool_events = ["function_call:lookup", "function_call_output:lookup"]
    assert after_user[1:] == tool_events[: len(after_user) - 1], kept

    report = run_lkeval(["report", "--results", str(out / "results.json")], clean_env(), timeout=60)
    assert report.returncode == 1, report.stdout + report.stderr
    assert "the run was interrupted (3 scenarios not run)" in report.stdout


# --- issue 18: nothing to run, selections that select less than meant -------------------------


@pytest.mark.parametrize(
    ("body", "extra", "said"),
    [
        ("scenarios: []\n", [], "nothing to run: the scenario file(s) hold no scenario"),
        ("scenarios:\n", [], "nothing to run: the scenario file(s) hold no scenario"),
        (
            yaml.safe_dump({"scenarios": [bare("a", "healthy")]}),
            ["--tag", "team=nobody"],
            "nothing to run: no scenario of 1 is selected (tag team=nobody)",
        ),
    ],
    ids=["empty-list", "empty-key", "selection-leaves-nothing"],
)
def test_nothing_to_run_is_exit_3_before_anything_boots(
    tmp_path: Path, body: str, extra: list[str], said: str
) -> None:
    """Issue 18 item 2: no results file, no agent, no fork server; one line saying why."""
    path = tmp_path / "scenarios.yaml"
    path.write_text(body)
    out = tmp_path / "out"
    proc = run_lkeval([*run_argv(BROKEN, path, out / "r.json"), *extra], clean_env(), timeout=60)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert f"lk-eval: {said}" in proc.stderr.splitlines()
    assert proc.stdout == "" and not out.exists()  # nothing started, nothing written


def test_a_match_pattern_that_matches_nothing_is_refused(tmp_path: Path) -> None:
    """Issue 18 item 10: a typo in one of several --match patterns is exit 2, naming it."""
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"scenarios": [bare("book-room", "healthy")]}))
    argv = [*run_argv(BROKEN, path, tmp_path / "r.json"), "--match", "book-*"]
    proc = run_lkeval([*argv, "--match", "chek-out*"], clean_env(), timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.splitlines()[0] == (
        "lk-eval: --match 'chek-out*' matches no scenario's id or label (of 1 in the suite)"
    )
    assert not (tmp_path / "r.json").exists()


def test_an_empty_shard_says_so_and_the_merge_gates_the_suite(tmp_path: Path) -> None:
    """Issue 18 item 2: shard 2/2 of a one-scenario suite is empty: its run exits 0 with a
    results file saying so; merged with shard 1/2 the whole suite is gated."""
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"scenarios": [bare("only", "silent")]}))
    files = []
    for shard, code in (("2/2", 0), ("1/2", 1)):
        results = tmp_path / shard.replace("/", "of") / "r.json"
        proc = run_lkeval(
            [*run_argv(BROKEN, path, results), "--shard", shard], clean_env(), timeout=300
        )
        assert proc.returncode == code, proc.stdout + proc.stderr
        files.append(str(results))
    empty = read_json(Path(files[0]))
    assert empty["metadata"]["empty_shard"] is True and empty["scenarios"] == []
    merged = tmp_path / "merged.json"
    proc = run_lkeval(["merge", *files, "-o", str(merged)], clean_env(), timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert read_json(merged)["metadata"]["empty_shard"] is False
    report = run_lkeval(["report", "--results", str(merged)], clean_env(), timeout=60)
    assert report.returncode == 1, report.stdout + report.stderr
    assert "1 scenario failed or errored: only" in report.stdout  # the silent agent


def test_regression_against_a_baseline_in_which_nothing_ran_is_not_blind(tmp_path: Path) -> None:
    """Issue 18 item 8: every baseline scenario errored, so nothing could regress: the gate
    acts as --fail-on any and says why, instead of passing a failing run."""
    broke = ScenarioResult("a", "A", "G", "Group", "s.yaml", 3, "error", "agent died")
    failing = _scenario("failed", (F,), reason="wrong room")
    # main's run (another run than the one gated: a baseline cannot be the run it gates)
    main_run = {"started_at": "2026-11-24T08:00:00+00:00", "git_sha": "main123"}
    base, now = _shard(tmp_path, "1/2", [broke], **main_run), _shard(tmp_path, "2/2", [failing])
    argv = ["report", "--results", str(now), "--baseline", str(base), "--fail-on", "regression"]
    proc = run_lkeval(argv, clean_env(), timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "--fail-on regression acts as --fail-on any" in proc.stdout.splitlines()[-1]


def _passed(sid: str, line: int) -> ScenarioResult:
    return ScenarioResult(sid, sid.upper(), "G", "Group", "s.yaml", line, "passed", attempts=(P,))


def _merge(*parts: Path) -> subprocess.CompletedProcess[str]:
    out = parts[0].parent / "merged.json"
    return run_lkeval(["merge", *map(str, parts), "-o", str(out)], clean_env(), timeout=60)


def test_shards_of_different_runs_do_not_merge(tmp_path: Path) -> None:
    """Issue 18 item 3: shard 1/2 of one suite plus shard 2/2 of another (or of another
    commit, lk-eval, options, judge) is exit 2 naming what differs; never a merged pass."""
    one = _shard(tmp_path, "1/2", [_passed("a", 3), _passed("c", 9)])
    cases = [
        (
            {"suite": SuiteFingerprint({"a": "d-a", "b": "other", "c": "d-c"}, {})},
            "shard 2/2 ({two}) ran another suite than shard 1/2 ({one}): scenario 'b' differs",
        ),
        (
            {"suite": SuiteFingerprint({"a": "d-a", "b": "d-b", "c": "d-c", "x": "d"}, {})},
            "shard 2/2 ({two}) ran another suite than shard 1/2 ({one}): scenario 'x' is not in "
            "the other's suite",
        ),
        (
            {"git_sha": "def456"},
            "shards ran different commits abc123 → def456 (shard 1/2 ({one}), shard 2/2 ({two}))",
        ),
        ({"lkeval_version": "9"}, "shards ran different lk-eval versions 0 → 9"),
        (
            {"suite": dataclasses.replace(SUITE, options={"--maybe-is-pass": "true"})},
            "shard 2/2 ({two}) ran with other options than shard 1/2 ({one}): --maybe-is-pass "
            "(not recorded) → true",
        ),
        (
            {"llms": (LLMInUse("judge", "tiny-judge", "127.0.0.1:9"),)},
            "",  # the first names no judge (an empty shard starts none): nothing to compare
        ),
    ]
    for k, (fields, said) in enumerate(cases):
        two = _shard(tmp_path, "2/2", [_passed("b", 6)], tag=str(k), **fields)
        proc = _merge(one, two)
        if not said:
            assert proc.returncode == 0, proc.stdout + proc.stderr
            continue
        assert proc.returncode == 2, (fields, proc.stdout + proc.stderr)
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith("lk-eval: refusing to merge: "), line
        assert said.format(one=one, two=two) in line, (said, line)
    judged = _shard(
        tmp_path,
        "1/2",
        [_passed("a", 3), _passed("c", 9)],
        tag="j",
        llms=(LLMInUse("judge", "big-judge", "127.0.0.1:1"),),
    )
    other = _shard(
        tmp_path,
        "2/2",
        [_passed("b", 6)],
        tag="j",
        llms=(LLMInUse("judge", "tiny-judge", "127.0.0.1:2"),),
    )
    proc = _merge(judged, other)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "ran another judge model than shard 1/2" in proc.stderr
    assert "big-judge → tiny-judge" in proc.stderr


def test_a_results_file_without_a_fingerprint_is_not_merged(tmp_path: Path) -> None:
    """Issue 18 item 3: a file an older lk-eval wrote says nothing of its suite: refused."""
    one = _shard(tmp_path, "1/2", [_passed("a", 3), _passed("c", 9)])
    old = _shard(tmp_path, "2/2", [_passed("b", 6)], suite=None, lkeval_version="0.9.0")
    proc = _merge(one, old)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"lk-eval: refusing to merge: {old} has no suite fingerprint (written by lk-eval "
        "0.9.0, before merge checked what shards ran): re-run every shard with this lk-eval, "
        "or `lkeval report` each file on its own"
    ]
    assert not (tmp_path / "merged.json").exists()


def test_a_scenario_of_the_suite_in_no_file_is_not_merged(tmp_path: Path) -> None:
    """Two files that together lack one of the suite's scenarios: refused."""
    one = _shard(tmp_path, "1/1", [_passed("a", 3)], tag="x")
    two = _shard(tmp_path, "1/1", [_passed("c", 9)], tag="y")
    proc = _merge(one, two)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "lk-eval: refusing to merge: scenario 'b' of the suite is in none of the files; pass "
        "every shard's results file"
    ]


def test_real_shards_carry_the_suite_fingerprint(tmp_path: Path) -> None:
    """Two empty shards of the same file agree; after one scenario's text changes, merge
    names it (the digests come from a real run, across processes)."""
    path = tmp_path / "scenarios.yaml"
    suite = {"scenarios": [bare("only", "silent"), bare("second", "silent")]}
    path.write_text(yaml.safe_dump(suite))
    files = []
    for k in range(3):
        if k == 2:
            suite["scenarios"][1]["instructions"] = "something else"
            path.write_text(yaml.safe_dump(suite))
        results = tmp_path / f"run{k}" / "r.json"
        proc = run_lkeval(
            [*run_argv(BROKEN, path, results), "--shard", "3/3"], clean_env(), timeout=60
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        files.append(results)
    meta = read_json(files[0])["metadata"]
    assert meta["empty_shard"] is True
    assert sorted(meta["suite"]["scenarios"]) == ["only", "second"]  # the whole suite
    assert meta["suite"]["options"]["--repeat"] == "1"
    assert read_json(files[1])["metadata"]["suite"] == meta["suite"]
    second = read_json(files[2])["metadata"]["suite"]["scenarios"]
    (changed,) = [sid for sid, d in second.items() if meta["suite"]["scenarios"][sid] != d]
    proc = _merge(files[0], files[2])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"ran another suite than shard 3/3 ({files[0]}): scenario {changed!r} differs" in (
        proc.stderr
    )


def _judged(votes: str) -> tuple[Attempt, ...]:
    """Attempts with one judge vote each ("p" pass, "f" fail)."""
    return tuple(
        Attempt(
            "passed" if v == "p" else "failed",
            verdicts=(Verdict("judge", "pass" if v == "p" else "fail"),),
        )
        for v in votes
    )


def _scenario(status: str, attempts: tuple[Attempt, ...] = (), **more: Any) -> ScenarioResult:
    return ScenarioResult("a", "A", "G", "Group", "s.yaml", 3, status, attempts=attempts, **more)  # type: ignore[arg-type]


def _sequential(votes: str) -> dict[str, Any]:
    attempts = _judged(votes)
    seen = [o for a in attempts if (o := observe(a)) is not None]
    return {"attempts": attempts, "sampling": describe(SequentialRule(), seen)}


P = Attempt("passed", verdicts=(Verdict("judge", "pass"),))
F = Attempt("failed", "wrong", verdicts=(Verdict("judge", "fail"),))
E = Attempt("error", "boom")


@pytest.mark.parametrize(
    ("status", "more", "gives"),
    [
        ("passed", {"attempts": (P,)}, ""),
        (
            "passed",
            {"attempts": (P, F), "min_pass": 2},
            "failed (1 of 2 attempt(s) passed, it needs 2)",
        ),
        (
            "failed",
            {"attempts": (P, P), "min_pass": 2},
            "passed (2 of 2 attempt(s) passed, it needs 2)",
        ),
        ("failed", {"attempts": (E,)}, "error (0 of 1 attempt(s) passed, it needs 1)"),
        ("skipped", {"attempts": (F,)}, "failed (0 of 1"),
        ("passed", {"attempts": (F,), "quarantined": True}, "failed (0 of 1"),
        ("error", {"attempts": (P,), "reason": "interrupted: 1/3 attempt(s) finished"}, ""),
        ("passed", {"attempts": (P,), "reason": "interrupted: 1/3 attempt(s) finished"}, "error"),
        ("passed", _sequential("ppp"), ""),
        (
            "failed",
            _sequential("ppp"),
            "passed (3 of 3 attempt(s) passed, decided by the sequential",
        ),
        ("passed", _sequential("p"), "error (1 of 1 attempt(s) passed, decided by the sequential"),
        ("failed", _sequential("fffff"), ""),
        ("skipped", {"reason": "not selected"}, ""),
        ("error", {"reason": "the fork's PR has no secrets"}, ""),
        ("passed", {}, "skipped or error (0 of 0"),
    ],
)
def test_report_recomputes_every_status_from_its_attempts(
    status: str, more: dict[str, Any], gives: str
) -> None:
    """Issue 18 item 9: a recorded status that its attempts do not give, in either direction
    and in every mode (fixed, sequential, quarantined, interrupted, not run), is refused."""
    meta = RunMetadata("0", None, "agent.py", ("s.yaml",), "now")
    problem = status_problem(RunResults(meta, (_scenario(status, **more),)))
    if not gives:
        assert problem == ""
        return
    assert problem.startswith(f"scenario A is recorded {status}, but its attempts give {gives}")
    assert problem.endswith("the status disagrees with the attempts; refusing to gate this file")


@pytest.mark.parametrize("status", ["passed", "skipped"])
def test_report_refuses_a_hand_edited_status(tmp_path: Path, status: str) -> None:
    """Issue 18 item 9 through the real command, both directions (a pass edited in, a failure
    edited away): exit 2 naming the file and scenario."""
    path = _shard(tmp_path, "1/1", [_scenario(status, (F,))])
    proc = run_lkeval(["report", "--results", str(path)], clean_env(), timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.splitlines()[0] == (
        f"lk-eval: {path}: scenario A is recorded {status}, but its attempts give failed (0 of 1 "
        "attempt(s) passed, it needs 1): the status disagrees with the attempts; refusing to "
        "gate this file"
    )


def test_report_refuses_a_file_that_lost_a_scenario_of_its_suite(tmp_path: Path) -> None:
    """A failing scenario deleted from a whole-run file (its fingerprint still names it) is
    exit 2; a shard's file holds only its part and is gated as it is."""
    path = _shard(tmp_path, "1/1", [_passed("a", 3), _passed("c", 9)], shard=None)
    proc = run_lkeval(["report", "--results", str(path)], clean_env(), timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.splitlines()[0] == (
        f"lk-eval: {path}: scenario 'b' of the suite its fingerprint names is not in the file; "
        "refusing to gate this file"
    )
    part = _shard(tmp_path, "1/2", [_passed("a", 3), _passed("c", 9)])
    proc = run_lkeval(["report", "--results", str(part)], clean_env(), timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stray = _shard(tmp_path, "1/2", [_passed("z", 3)], tag="z")
    proc = run_lkeval(["report", "--results", str(stray)], clean_env(), timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "scenario 'z' is not in the suite the file's fingerprint names" in proc.stderr
