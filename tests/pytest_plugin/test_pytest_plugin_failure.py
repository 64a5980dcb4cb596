"""What a failed scenario shows under pytest, and a test's session read as a transcript."""

from __future__ import annotations

from livekit.agents.llm import AgentHandoff, ChatContext, FunctionCall, FunctionCallOutput

from lkeval.pytest_plugin.failure import failure_text
from lkeval.pytest_plugin.transcript import session_transcript
from lkeval.results.model import Attempt, ExpectationResult, ScenarioResult, TranscriptItem, Verdict
from lkeval.text.masking import register_secret

SECRET = "sk-live-failure-text-0123456789abcdef"


def _result(**attempt: object) -> ScenarioResult:
    return ScenarioResult(
        scenario_id="SCN_x",
        label="X",
        group_id="g",
        group_name="G",
        file="scenarios.yaml",
        line=7,
        status="failed",
        attempts=(Attempt(status="failed", **attempt),),  # type: ignore[arg-type]
    )


def test_the_failure_names_the_check_the_judge_and_shows_the_transcript() -> None:
    result = _result(
        transcript=(
            TranscriptItem("message", 0, role="assistant", text="Welcome!"),
            TranscriptItem("function_call", 1, name="book_room", arguments='{"nights": 3}'),
        ),
        expectations=(
            ExpectationResult(1, 0, "call book_room(nights=2)", False, "got nights=3", line=12),
        ),
        verdicts=(Verdict("judge", "fail", "It booked three nights."),),
    )
    text = failure_text(result)
    assert text.splitlines()[0] == (
        "scenario SCN_x (scenarios.yaml:7) failed: expected call book_room(nights=2): got nights=3"
    )
    assert "  turn 1, expectation 1 (line 12): call book_room(nights=2) — got nights=3" in text
    assert "  judge: fail — It booked three nights." in text
    assert '  [1] → call book_room({"nights": 3})' in text


def test_the_failure_is_masked_and_inert() -> None:
    # The transcript is text the agent chose: a key it was given, a workflow command, escapes.
    register_secret(SECRET)
    result = _result(
        reason=f"agent said {SECRET}",
        transcript=(
            TranscriptItem("message", 1, role="assistant", text=f"key {SECRET}\n::error::pwned"),
            TranscriptItem("message", 1, role="assistant", text="\x1b[31mred\x1b[0m"),
        ),
    )
    text = failure_text(result)
    assert SECRET not in text
    assert "\x1b" not in text
    assert not any(line.lstrip().startswith("::error::") for line in text.splitlines())


def test_a_sessions_history_reads_as_lkevals_transcript() -> None:
    chat = ChatContext()
    chat.add_message(role="system", content="You are a desk.")
    chat.add_message(role="assistant", content="Welcome!")
    chat.add_message(role="user", content="Book it.")
    chat.items.append(FunctionCall(call_id="c1", name="book_room", arguments='{"nights": 2}'))
    chat.items.append(
        FunctionCallOutput(call_id="c1", name="book_room", output="ok", is_error=False)
    )
    chat.items.append(AgentHandoff(old_agent_id="desk", new_agent_id="booking"))
    chat.add_message(role="user", content="Thanks.")

    class Session:
        history = chat

    assert session_transcript(Session()) == [
        TranscriptItem("message", 0, role="assistant", text="Welcome!"),
        TranscriptItem("message", 1, role="user", text="Book it."),
        TranscriptItem(
            "function_call", 1, name="book_room", arguments='{"nights": 2}', call_id="c1"
        ),
        TranscriptItem(
            "function_call_output", 1, name="book_room", output="ok", is_error=False, call_id="c1"
        ),
        TranscriptItem("agent_handoff", 1, old_agent="desk", new_agent="booking"),
        TranscriptItem("message", 2, role="user", text="Thanks."),
    ]
