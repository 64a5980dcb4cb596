"""The rules that turn an attempt's facts into its status (lkeval/run/outcome.py)."""

from __future__ import annotations

from lkeval.results.model import ExpectationResult, TranscriptItem, Verdict
from lkeval.run.outcome import agent_error_text, decide, no_conversation

USER = TranscriptItem(kind="message", turn=1, role="user", text="hi")
REPLY = TranscriptItem(kind="message", turn=1, role="assistant", text="hello")
HANDOFF = TranscriptItem(kind="agent_handoff", turn=0, new_agent="a")
OK = ExpectationResult(turn=1, index=0, description="message", passed=True)
BAD = ExpectationResult(
    turn=1, index=0, description="message contains 'x'", passed=False, reason="no x"
)


def test_no_caller_turn_and_no_reply_is_no_conversation() -> None:
    why = no_conversation([HANDOFF], [], 0, "the agent ended the session")
    assert why == (
        "no conversation happened (the agent ended the session): "
        "the agent never produced an assistant message"
    )


def test_caller_turns_without_any_reply_are_no_conversation() -> None:
    why = no_conversation([HANDOFF, USER], [], 0, "the agent stayed silent")
    assert (
        why == "the agent never produced an assistant message in 1 caller turn(s) "
        "(the agent stayed silent)"
    )


def test_scripted_expectations_that_hold_on_silence_asked_for_it() -> None:
    assert no_conversation([USER], [OK], 0, "") == ""
    assert no_conversation([USER], [OK], 1, "") != ""  # a scripted turn never played
    assert no_conversation([USER], [BAD], 0, "") != ""
    assert no_conversation([USER, REPLY], [], 0, "") == ""


def test_a_scripted_failure_stays_failed_when_the_judge_is_down() -> None:
    verdicts = [Verdict("scripted", "fail", "turn 1: message contains 'x': no x")]
    decision = decide(verdicts, False, "", [BAD], ["judge failed: HTTP 500"])
    assert decision.status == "failed"
    assert decision.reason == "turn 1: message contains 'x': no x; judge failed: HTTP 500"


def test_a_fault_without_a_known_failure_is_an_error_never_a_pass() -> None:
    judge_pass = [Verdict("judge", "pass")]
    decision = decide(judge_pass, True, "", [], ["on_simulation_end raised: no such table"])
    assert (decision.status, decision.reason) == (
        "error",
        "on_simulation_end raised: no such table",
    )
    assert decide(judge_pass, True, "", [], []).status == "passed"
    assert decide([], True, "", [], []).status == "skipped"


def test_the_agents_own_error_text_prefers_the_unrecoverable_line() -> None:
    log = [
        "08:01:33 WARNING livekit.agents failed to generate LLM completion, retrying",
        "08:01:33 ERROR livekit.agents AgentSession is closing due to unrecoverable error: "
        "Connection error.",
        "08:01:33 ERROR livekit.agents Error in _llm_inference_task",
        "livekit.agents._exceptions.APIConnectionError: failed after 2 attempts",
    ]
    event = "type='llm_error' error=APIConnectionError('Connection error.', body=None)"
    assert agent_error_text([event], log) == (
        "AgentSession is closing due to unrecoverable error: Connection error."
    )
    assert agent_error_text([event, event], log[:1]) == "APIConnectionError: Connection error."
    assert agent_error_text([], log[2:]) == "Error in _llm_inference_task"
    assert agent_error_text([], log[3:]) == log[3]
    assert agent_error_text([], []) == ""


def test_whitespace_is_not_speech() -> None:
    """Issue 18 item 7: an agent whose only messages are whitespace never spoke."""
    blank = TranscriptItem(kind="message", turn=1, role="assistant", text=" \n\t ")
    why = no_conversation([USER, blank], [], 0, "")
    assert why == "the agent never produced an assistant message in 1 caller turn(s)"
    assert no_conversation([USER, blank, REPLY], [], 0, "") == ""
