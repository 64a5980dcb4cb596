"""The judge preflight, the models a run records, and what reports say about the judge.

The judge is a real (scripted) OpenAI-compatible server over HTTP; the CLI runs as a child
process, as a user runs it.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import json
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from conftest import HOTEL, hotel_env, run_argv, run_lkeval
from report_fixtures import metadata, results_of, scenario

from lkeval.errors import ExitCode, LkevalError
from lkeval.llm.config import LLMEndpointOptions, LLMOptions, LLMSpec, resolve_llm_spec
from lkeval.llm.evaluator import LLMEvaluator
from lkeval.llm.preflight import (
    CANARY_ASKS,
    CANARY_MAJORITY,
    JudgePreflightError,
    WeakJudgeError,
    _ask_canary,
    preflight_judge,
    preflight_line,
)
from lkeval.reporters import MarkdownReporter, build_report
from lkeval.results.baseline import compare
from lkeval.results.gate import evaluate_gate
from lkeval.results.model import JudgeCheck, LLMInUse
from lkeval.results.results_json import dump_results, results_from_dict
from lkeval.testing.llm_server import LLMServer

REFUSAL = "I can't help with that"  # only the known-bad canary has the agent say this


def verdict(value: str, **match: Any) -> dict[str, Any]:
    args = {"reasoning": f"canary {value}", "verdict": value}
    return {**match, "tool_calls": [{"name": "submit_verdict", "arguments": args}]}


def spec_for(server: LLMServer) -> LLMSpec:
    flags = LLMOptions(judge=LLMEndpointOptions(model="judge", base_url=server.base_url))
    return replace(resolve_llm_spec("judge", flags, environ={}), retry_delay=0.01, max_retries=0)


def test_a_judge_that_tells_the_canaries_apart_passes_the_preflight() -> None:
    with LLMServer([verdict("fail", last_user=REFUSAL), verdict("pass")]) as server:
        check = preflight_judge(spec_for(server), environ={})
        prompts = [r.body["messages"][-1]["content"] for r in server.requests]
    assert check == JudgeCheck(
        known_fail="fail",
        known_pass="pass",
        warning="",
        known_fail_votes=("fail",) * 12,
        known_pass_votes=("pass",) * 3,
        verdict_form="tool",
    )
    # one ask learns the form (a tool call came back: "tool"); a consistent judge is then
    # decided by two rounds of the six known-bad canaries and 3 asks of the known-good one
    assert len(prompts) == 16 and sum(REFUSAL in p for p in prompts) == 12
    assert len({p for p in prompts if REFUSAL in p}) == 6  # six distinct conversations
    assert preflight_line(check) == (
        "judge preflight: known-bad canaries fail 12 of 12; known-good canary pass, pass, pass: "
        "the judge tells them apart"
    )


def test_on_a_llama_like_server_the_preflight_learns_the_json_schema_form() -> None:
    """Issue 18.16: llama.cpp answers "required" with the call as text, padded to the cap."""
    with LLMServer(
        [verdict("fail", last_user=REFUSAL), verdict("pass")], quirks={"like": "llama-server"}
    ) as server:
        check = preflight_judge(spec_for(server), environ={})
        forms = ["response_format" in r.body for r in server.requests]
    assert check.verdict_form == "json_schema"
    assert (check.known_fail_votes, check.known_pass_votes) == (("fail",) * 12, ("pass",) * 3)
    assert forms == [False] + [True] * 16  # the tool form once, then structured output only


def test_the_run_asks_in_the_form_the_preflight_learned() -> None:
    rules = [verdict("fail", last_user=REFUSAL), verdict("pass")]
    with LLMServer(rules, quirks={"like": "llama-server"}) as server:
        evaluator = LLMEvaluator(None, spec_for(server), judge_scripted=True, environ={})
        evaluator.preflight(io.StringIO())
    assert evaluator.judge_spec is not None
    assert evaluator.judge_spec.verdict_form == "json_schema"


def test_a_judge_that_passes_the_known_bad_canary_stops_the_run() -> None:
    """Issue 18.5: it was a warning line, then a green gate."""
    with LLMServer([verdict("pass")]) as server:
        with pytest.raises(WeakJudgeError) as info:
            preflight_judge(spec_for(server), environ={})
        port = server.port
    message = str(info.value)
    assert message.startswith(
        f"judge preflight: the judge (judge at 127.0.0.1:{port}) passed the known-bad canary "
        "transcripts (it answered pass 6 of 6), so the gate would pass broken agents; no "
        "agent was started."
    )
    assert "--allow-weak-judge" in message and "\n" not in message
    assert isinstance(info.value, LkevalError) and info.value.exit_code == ExitCode.USAGE


def test_allow_weak_judge_runs_on_and_records_that_the_judge_failed_its_canary() -> None:
    with LLMServer([verdict("pass")]) as server:
        check = preflight_judge(spec_for(server), environ={}, allow_weak=True)
    assert check.weak and check.known_fail_votes == ("pass",) * 6
    assert (
        "passed the known-bad canary transcripts (it answered pass 6 of 6) and the run "
        "went on only because of --allow-weak-judge" in check.warning
    )
    assert preflight_line(check).startswith(
        "WARNING: judge preflight (known-bad canaries pass 6 of 6; known-good canary "
        "pass, pass, pass): the judge (judge at 127.0.0.1:"
    )


def test_maybe_on_the_known_bad_canary_follows_maybe_is_pass() -> None:
    """A 0.5B judge said maybe on the known-bad canary: 'judged right' was a lie under
    --maybe-is-pass, where that maybe passes every broken agent."""
    rules = [verdict("maybe", last_user=REFUSAL), verdict("pass")]
    with LLMServer(rules) as server:
        check = preflight_judge(spec_for(server), environ={})
        with pytest.raises(WeakJudgeError) as info:
            preflight_judge(spec_for(server), environ={}, maybe_is_pass=True)
    assert not check.weak and check.known_fail_votes == ("maybe",) * 12
    assert preflight_line(check).endswith(
        "the judge tells them apart (maybe counts as a fail without --maybe-is-pass)"
    )
    assert "(it answered maybe 6 of 6; maybe counts as a pass with --maybe-is-pass)" in str(
        info.value
    )


def test_a_judge_unsure_on_the_known_good_canary_is_a_warning_too() -> None:
    with LLMServer([verdict("fail", last_user=REFUSAL), verdict("maybe")]) as server:
        check = preflight_judge(spec_for(server), environ={})
    assert (
        "did not pass the known-good canary transcript (it answered maybe, maybe, maybe; "
        "maybe counts as a fail without --maybe-is-pass): expect false failures" in check.warning
    )
    assert not check.weak


def test_a_split_canary_is_asked_until_one_side_has_three_answers() -> None:
    # the known-good canary: the first answer learns the form, then pass, pass, fail, fail
    good = "We open at 9 am"
    split = [{**verdict(v, last_user=good), "times": 1} for v in ("pass", "pass", "pass")]
    split += [{**verdict("fail", last_user=good), "times": 2}]
    with LLMServer([*split, verdict("fail", last_user=REFUSAL), verdict("pass")]) as server:
        check = preflight_judge(spec_for(server), environ={})
        asked = sum(good in r.body["messages"][-1]["content"] for r in server.requests)
    assert (
        asked == 1 + 5 and sorted(check.known_pass_votes) == ["fail", "fail", "pass"] + ["pass"] * 2
    )
    assert not check.weak and check.known_pass == "pass" and not check.warning


def _scripted(queue: list[str]) -> Any:
    async def ask() -> str:
        return queue.pop(0)

    return ask


def _stop_probability(p: Fraction) -> Fraction:
    """P(the preflight stops the run), by playing every 5-answer sequence through the real
    asking loop with answers 'pass' (wrong, probability p) or 'fail' and weighing it."""
    total = Fraction(0)
    for answers in itertools.product(("pass", "fail"), repeat=CANARY_ASKS):
        canary = asyncio.run(_ask_canary(_scripted(list(answers)), maybe_is_pass=False))
        wrong = answers.count("pass")
        if canary.passed:
            total += p**wrong * (1 - p) ** (CANARY_ASKS - wrong)
    return total


def test_the_canary_numbers_stated_in_the_docstring() -> None:
    """A judge flipping 10% of its verdicts is stopped in at most 1% of runs (0.856%); one
    that passes everything, every time; the early stop changes nothing (exact fractions)."""
    assert (CANARY_ASKS, CANARY_MAJORITY) == (5, 3)
    assert _stop_probability(Fraction(1, 10)) == Fraction(856, 100_000)  # 0.0081+0.00045+0.00001
    assert _stop_probability(Fraction(1, 10)) <= Fraction(1, 100)
    assert _stop_probability(Fraction(1)) == 1
    assert _stop_probability(Fraction(3, 10)) == Fraction(16308, 100_000)
    assert _stop_probability(Fraction(1, 2)) == Fraction(1, 2)
    # the alternatives the docstring rejects
    assert Fraction(1, 10) ** 2 == Fraction(1, 100) and Fraction(1, 2) ** 2 == Fraction(1, 4)


def test_a_judge_that_answers_in_text_cannot_pass_the_preflight() -> None:
    with LLMServer([{"text": "Both look fine to me."}]) as server:
        with pytest.raises(JudgePreflightError) as info:
            preflight_judge(spec_for(server), environ={})
        port = server.port
    message = str(info.value)
    assert "no agent was started" in message
    assert f"judge LLM judge at 127.0.0.1:{port}" in message
    assert "did not call submit_verdict" in message and "\n" not in message


def scenarios_file(tmp_path: Path) -> Path:
    path = tmp_path / "scenarios.yaml"
    path.write_text(
        "name: Sim\nscenarios:\n  - label: Book\n    instructions: Book a room.\n"
        "    agent_expectations: The agent books the room.\n"
    )
    return path


def test_cli_stops_with_exit_2_before_any_agent_boots_when_the_judge_cannot_answer(
    tmp_path: Path,
) -> None:
    secret = "sk-canary-judge-key-123456"
    results = tmp_path / "out" / "results.json"
    rules = [{"model": "judge", "status": 401, "text": f"Incorrect API key: {secret}"}]
    with LLMServer(rules) as llm:
        argv = [*run_argv(HOTEL / "agent.py", scenarios_file(tmp_path), results)]
        argv += ["--caller-model", "caller", "--judge-model", "judge"]
        # cold starts: a warm run preloads a fork server during the preflight only to stop
        # it, which test_signal_before_the_engine.py's failed-preflight test checks
        argv += ["--cold-start"]
        proc = run_lkeval(argv, hotel_env(llm, LKEVAL_JUDGE_API_KEY=secret), timeout=180)
        models = [r.body.get("model") for r in llm.requests]
        port = llm.port
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0] == (
        f"LLMs: caller caller at 127.0.0.1:{port} · judge judge at 127.0.0.1:{port}"
    )
    error = proc.stderr.strip().splitlines()[-1]
    assert "judge preflight" in error and f"127.0.0.1:{port}" in error
    assert "HTTP 401" in error and "Traceback" not in proc.stderr
    assert secret not in proc.stdout + proc.stderr
    assert set(models) == {"judge"}  # no agent booted: its LLM (hotel-agent) was never asked
    assert not (tmp_path / "out" / "logs").exists()


@pytest.mark.e2e
def test_cli_names_the_models_first_and_records_them_and_the_canaries(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    with LLMServer.from_file(HOTEL / "llm_rules.yaml") as llm:
        argv = [*run_argv(HOTEL / "agent.py", HOTEL / "scenarios.yaml", results)]
        argv += ["--caller-model", "caller", "--judge-model", "judge", "--match", "*talking*"]
        proc = run_lkeval(argv, hotel_env(llm))
        port = llm.port
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("LLMs: caller caller at 127.0.0.1:"), proc.stdout
    assert lines[1] == (
        "judge preflight: known-bad canaries fail 12 of 12; known-good canary pass, pass, pass: "
        "the judge tells them apart"
    )
    meta = json.loads(results.read_text())["metadata"]
    host = f"127.0.0.1:{port}"
    assert meta["llms"] == [
        {"role": "caller", "model": "caller", "host": host},
        {"role": "judge", "model": "judge", "host": host},
    ]
    assert meta["judge_check"] == {
        "known_fail": "fail",
        "known_pass": "pass",
        "warning": "",
        "known_fail_votes": ["fail"] * 12,
        "known_pass_votes": ["pass"] * 3,
        "weak": False,
        "verdict_form": "tool",
    }


def test_old_results_files_without_models_still_load() -> None:
    raw = json.loads(dump_results(results_of(scenario("a"))))
    for key in ("llms", "judge_check"):
        raw["metadata"].pop(key)
    loaded = results_from_dict(raw)
    assert loaded.metadata.llms == () and loaded.metadata.judge_check is None
    recorded = results_of(scenario("a"))
    recorded = replace(
        recorded,
        metadata=replace(
            recorded.metadata,
            llms=(LLMInUse("judge", "gpt-4.1-mini", "api.openai.com"),),
            judge_check=JudgeCheck("pass", "pass", "passed a known-bad canary"),
        ),
    )
    assert results_from_dict(json.loads(dump_results(recorded))) == recorded


def with_llms(*llms: LLMInUse, warning: str = "") -> Any:
    check = JudgeCheck("fail" if not warning else "pass", "pass", warning)
    meta = replace(metadata(), llms=llms, judge_check=check)
    return replace(results_of(scenario("a")), metadata=meta)


def test_a_baseline_with_another_judge_or_caller_model_is_flagged() -> None:
    caller = LLMInUse("caller", "gpt-4.1-mini", "api.openai.com")
    before = with_llms(caller, LLMInUse("judge", "gpt-4.1-mini", "api.openai.com"))
    now = with_llms(caller, LLMInUse("judge", "qwen3-8b", "llama:8080"))
    assert compare(now, before).model_changes == (
        "judge model changed since the baseline: gpt-4.1-mini at api.openai.com → "
        "qwen3-8b at llama:8080",
    )
    assert compare(before, before).model_changes == ()
    assert compare(now, results_of(scenario("a"))).model_changes == ()  # nothing recorded

    comparison = compare(now, before)
    report = build_report(now, comparison, evaluate_gate(now, comparison))
    markdown = MarkdownReporter().format(report)
    assert "> ⚠️ **Judge model changed since the baseline: gpt-4.1-mini" in markdown


def test_a_new_port_on_the_same_host_is_not_a_model_change() -> None:
    """Issue 18.14: a local server on an ephemeral port warned on every second run."""
    before = with_llms(LLMInUse("caller", "caller", "127.0.0.1:36143"))
    assert (
        compare(with_llms(LLMInUse("caller", "caller", "127.0.0.1:38619")), before).model_changes
        == ()
    )
    ipv6 = with_llms(LLMInUse("judge", "qwen", "[::1]:8080"))
    assert compare(with_llms(LLMInUse("judge", "qwen", "[::1]:9090")), ipv6).model_changes == ()
    # another model, another host or another provider still is one
    assert compare(with_llms(LLMInUse("caller", "other", "127.0.0.1:1")), before).model_changes == (
        "caller model changed since the baseline: caller → other",
    )
    assert compare(
        with_llms(LLMInUse("caller", "caller", "10.0.0.2:36143")), before
    ).model_changes == (
        "caller model changed since the baseline: caller at 127.0.0.1:36143 → caller at "
        "10.0.0.2:36143",
    )
    inference = with_llms(LLMInUse("judge", "openai/gpt-4.1-mini", "agent-gateway.livekit.cloud"))
    other = with_llms(LLMInUse("judge", "google/gemini-2.0-flash", "agent-gateway.livekit.cloud"))
    assert compare(other, inference).model_changes != ()


def test_the_report_warns_when_the_judge_got_a_canary_wrong() -> None:
    results = with_llms(warning="the judge (x at y) passed a known-bad canary transcript")
    markdown = MarkdownReporter().format(build_report(results, None, evaluate_gate(results, None)))
    assert "> ⚠️ **Judge preflight: the judge (x at y) passed a known-bad canary" in markdown
    fine = with_llms()
    clean = MarkdownReporter().format(build_report(fine, None, evaluate_gate(fine, None)))
    assert "⚠️" not in clean


def test_nothing_judged_does_not_blame_the_agent() -> None:
    reason = "judge failed: judge LLM j at h: HTTP 500 Internal Server Error: down"
    results = results_of(
        scenario("a", "error", reason=reason), scenario("b", "error", reason=reason)
    )
    gate = evaluate_gate(results, None)
    assert gate.exit_code == ExitCode.NOTHING_RAN
    (line,) = gate.reasons
    assert line.startswith("nothing could be judged: the judge failed in all 2 scenario(s)")
    assert "agent is not at fault" in line and "HTTP 500" in line
    assert "agent did not boot" not in line
    markdown = MarkdownReporter().format(build_report(results, None, gate))
    assert "❌ nothing could be judged" in markdown

    mixed = results_of(scenario("a", "error", reason=reason), scenario("b", "error", reason="x"))
    (line,) = evaluate_gate(mixed, None).reasons
    assert line.startswith("nothing could run") and "1 of them because the judge failed" in line
