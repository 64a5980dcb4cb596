"""A failed audio attempt's report names its call's files (the WAV and the SVG timeline), and a
failed conversation carries the ``lkeval pin`` command that keeps it as a test."""

from __future__ import annotations

from report_fixtures import msg, results_of, scenario

from lkeval.reporters import MarkdownReporter, build_report
from lkeval.results.gate import evaluate_gate
from lkeval.results.model import Attempt, AudioCallRecord, Verdict

CONVERSATION = (msg(1, "user", "My booking number is B 4 2 7."), msg(1, "assistant", "Booked."))


def markdown(attempt: Attempt) -> str:
    results = results_of(scenario("Spoken booking", "failed", attempts=(attempt,)))
    return MarkdownReporter().format(build_report(results, None, evaluate_gate(results, None)))


def test_a_failed_call_names_its_recording_and_timeline_and_the_pin_command() -> None:
    call = AudioCallRecord(recording="logs/SCN_x.call.wav", timeline="logs/SCN_x.call.svg")
    failed = Attempt(
        "failed",
        transcript=CONVERSATION,
        verdicts=(Verdict("judge", "fail", "the number was misheard"),),
        call=call,
    )
    report = markdown(failed)
    assert "<code>logs/SCN&#95;x.call.wav</code> · <code>logs/SCN&#95;x.call.svg</code>" in report
    assert "lkeval pin --results results.json --scenario SCN&#95;Spoken&#95;booking" in report


def test_no_call_no_conversation_no_such_lines() -> None:
    report = markdown(Attempt("failed", verdicts=(Verdict("judge", "fail", "no"),)))
    assert "The call, to hear and see" not in report and "lkeval pin" not in report
