"""A canned run (and its baseline) covering every outcome a report must render.

Shared by the golden-output tests, the gate/baseline tests and the GitHub end-to-end tests.
Set ``LKEVAL_UPDATE_GOLDEN=1`` to rewrite the golden files from the current output.
"""

from __future__ import annotations

import os
from pathlib import Path

from lkeval.publish.files import write_text
from lkeval.results.model import (
    Attempt,
    ExpectationResult,
    RunMetadata,
    RunResults,
    ScenarioResult,
    SuiteFingerprint,
    TranscriptItem,
    Usage,
    Verdict,
)
from lkeval.results.results_json import dump_results

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE_GOLDEN = os.environ.get("LKEVAL_UPDATE_GOLDEN") == "1"


def assert_golden(name: str, actual: str) -> None:
    """Compare ``actual`` with tests/golden/``name`` (rewritten under LKEVAL_UPDATE_GOLDEN=1)."""
    path = GOLDEN_DIR / name
    if UPDATE_GOLDEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    assert path.exists(), f"{path} missing: run with LKEVAL_UPDATE_GOLDEN=1 to create it"
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"{name} differs from its golden file (LKEVAL_UPDATE_GOLDEN=1)"


def metadata(**overrides: object) -> RunMetadata:
    values: dict[str, object] = {
        "lkeval_version": "0.1.0",
        "livekit_agents_version": "1.8.9",
        "agent": "agent.py",
        "scenario_files": ("evals/booking.yaml", "evals/frontdesk.yaml"),
        "started_at": "2025-01-02T03:04:05Z",
        "finished_at": "2025-01-02T03:04:47Z",
        "duration_seconds": 42.5,
        "git_sha": "0123456789abcdef0123456789abcdef01234567",
        "git_branch": "feature/booking",
    }
    values.update(overrides)
    return RunMetadata(**values)


def verdicts_for(status: str) -> tuple[Verdict, ...]:
    """The judge verdict an attempt with this status carries (``lkeval report`` recomputes
    every attempt's status from its verdicts): none for an error or a skipped attempt."""
    if status in ("passed", "failed"):
        return (Verdict("judge", "pass" if status == "passed" else "fail"),)
    return ()


def msg(turn: int, role: str, text: str, **kw: object) -> TranscriptItem:
    return TranscriptItem(kind="message", turn=turn, role=role, text=text, **kw)


BOOKING_TRANSCRIPT = (
    msg(0, "assistant", "Welcome to the Grand Hotel. How can I help?"),
    msg(1, "user", "I'd like a room for two nights from March 3."),
    TranscriptItem(
        kind="function_call",
        turn=1,
        name="book_room",
        arguments='{"check_in": "2025-03-03", "nights": 2}',
        call_id="call_1",
    ),
    TranscriptItem(
        kind="function_call_output",
        turn=1,
        name="book_room",
        output='{"confirmation": "GH-1042"}',
        is_error=False,
        call_id="call_1",
    ),
    msg(1, "assistant", "Booked! Your confirmation is GH-1042."),
)

PASSED = ScenarioResult(
    scenario_id="SCN_simple",
    label="Simple room booking",
    group_id="SCNG_booking",
    group_name="Room booking",
    file="evals/booking.yaml",
    line=5,
    status="passed",
    tags={"feature": "room_booking"},
    attempts=(
        Attempt(
            status="passed",
            transcript=BOOKING_TRANSCRIPT,
            verdicts=(Verdict("judge", "pass", "The booking was made and confirmed."),),
            duration_seconds=3.25,
            usage={
                "agent": Usage(1200, 150, 0.0012),
                "caller": Usage(800, 90, 0.0008),
                "judge": Usage(1500, 60, 0.0021),
            },
        ),
    ),
    duration_seconds=3.25,
)

CANCEL_TRANSCRIPT = (
    msg(1, "user", "Cancel booking GH-1042 please | now"),
    TranscriptItem(
        kind="function_call",
        turn=1,
        name="cancel_booking",
        arguments='{"id": "GH-1042"}',
        call_id="call_2",
    ),
    TranscriptItem(
        kind="function_call_output",
        turn=1,
        name="cancel_booking",
        output="An internal error occurred",
        is_error=True,
        call_id="call_2",
    ),
    msg(1, "assistant", "Done! <script>alert('x')</script> & all set.\nAnything else?"),
)

FAILED = ScenarioResult(
    scenario_id="SCN_cancel",
    label="Cancel a booking",
    group_id="SCNG_booking",
    group_name="Room booking",
    file="evals/booking.yaml",
    line=21,
    status="failed",
    reason="",
    attempts=(
        Attempt(
            status="failed",
            transcript=CANCEL_TRANSCRIPT,
            expectations=(
                ExpectationResult(1, 0, "function_call cancel_booking", True, line=30),
                ExpectationResult(
                    1,
                    1,
                    "assistant message with intent 'reports the failure'",
                    False,
                    "the agent claimed success although the tool failed",
                    line=33,
                ),
            ),
            verdicts=(
                Verdict("judge", "fail", "The agent told the guest the cancellation worked."),
                Verdict("agent", "fail", "booking GH-1042 still active"),
            ),
            duration_seconds=4.5,
            usage={"agent": Usage(900, 80, 0.0009), "judge": Usage(1100, 70, 0.0016)},
        ),
    ),
    duration_seconds=4.5,
)


def _repeat_attempt(status: str, reason: str = "") -> Attempt:
    return Attempt(
        status=status,
        transcript=(msg(1, "user", "Book the suite"), msg(1, "assistant", "Suite booked.")),
        verdicts=(Verdict("judge", "pass" if status == "passed" else "fail", reason or "ok"),),
        duration_seconds=2.0,
        usage={"agent": Usage(300, 40)},
    )


REPEATED = ScenarioResult(
    scenario_id="SCN_suite",
    label="Suite booking (repeated)",
    group_id="SCNG_booking",
    group_name="Room booking",
    file="evals/booking.yaml",
    line=40,
    status="failed",
    attempts=(
        _repeat_attempt("passed"),
        _repeat_attempt("failed", "The agent booked a standard room instead."),
        _repeat_attempt("passed"),
    ),
    min_pass=3,
    duration_seconds=6.0,
)

ERRORED = ScenarioResult(
    scenario_id="SCN_crash",
    label="Late check-out",
    group_id="SCNG_frontdesk",
    group_name="Front desk",
    file="evals/frontdesk.yaml",
    line=7,
    status="error",
    reason="agent crashed before connecting (job crashed)",
    attempts=(
        Attempt(
            status="error",
            reason="agent crashed before connecting (job crashed)",
            end_reason="boot",
            log_path=".lkeval/logs/SCN_crash-1.log",
            log_tail=(
                "\x1b[32mDEBUG\x1b[0m livekit.agents starting worker",
                "Traceback (most recent call last):",
                '  File "agent.py", line 12, in entrypoint',
                "KeyError: 'guest'",
                '{"message": "job crashed", "reason": "job crashed"}',
            ),
            duration_seconds=12.0,
        ),
    ),
    duration_seconds=12.0,
)

QUARANTINED = ScenarioResult(
    scenario_id="SCN_greeting",
    label="Greets by name",
    group_id="SCNG_frontdesk",
    group_name="Front desk",
    file="evals/frontdesk.yaml",
    line=19,
    status="failed",
    tags={"quarantine": "true"},
    quarantined=True,
    attempts=(
        Attempt(
            status="failed",
            transcript=(msg(0, "assistant", "Hello!"),),
            verdicts=(Verdict("judge", "fail", "The agent did not use the guest's name."),),
            duration_seconds=1.5,
        ),
    ),
    duration_seconds=1.5,
)

SKIPPED = ScenarioResult(
    scenario_id="SCN_spa",
    label="Spa appointment",
    group_id="SCNG_frontdesk",
    group_name="Front desk",
    file="evals/frontdesk.yaml",
    line=31,
    status="skipped",
    reason="not selected by --tags feature=rooms",
)

FIXED = ScenarioResult(
    scenario_id="SCN_handoff",
    label="Handoff to concierge",
    group_id="SCNG_frontdesk",
    group_name="Front desk",
    file="evals/frontdesk.yaml",
    line=44,
    status="passed",
    attempts=(
        Attempt(
            status="passed",
            transcript=(
                msg(1, "user", "Can I talk to the concierge?"),
                TranscriptItem(
                    kind="agent_handoff", turn=1, old_agent="FrontDesk", new_agent="Concierge"
                ),
                msg(1, "assistant", "Concierge here, how can I help?"),
            ),
            verdicts=(Verdict("scripted", "pass"),),
            duration_seconds=2.75,
        ),
    ),
    duration_seconds=2.75,
)

REMOVED = ScenarioResult(
    scenario_id="SCN_parking",
    label="Parking question",
    group_id="SCNG_frontdesk",
    group_name="Front desk",
    file="evals/frontdesk.yaml",
    line=60,
    status="passed",
    attempts=(Attempt(status="passed", verdicts=verdicts_for("passed"), duration_seconds=1.0),),
    duration_seconds=1.0,
)


#: The options the canned run recorded: ``lkeval report`` recomputes quarantine from them.
RUN_OPTIONS = {
    "--quarantine": '[["quarantine", "true"]]',
    "--tag": "(none)",
    "--match": '["SCN_simple", "SCN_cancel", "SCN_suite", "SCN_crash", "SCN_greeting", "SCN_h*"]',
}


def run_results() -> RunResults:
    """The current run: passed, failed, repeated, error, quarantined, skipped, fixed."""
    scenarios = (PASSED, FAILED, REPEATED, ERRORED, QUARANTINED, SKIPPED, FIXED)
    suite = SuiteFingerprint({s.scenario_id: f"digest-{s.scenario_id}" for s in scenarios})
    suite = SuiteFingerprint(suite.scenarios, dict(RUN_OPTIONS))
    return RunResults(metadata=metadata(suite=suite), scenarios=scenarios)


def baseline_results() -> RunResults:
    """The baseline: FAILED passed then (regression), FIXED failed then, ERRORED is new,
    REMOVED is gone now."""
    from dataclasses import replace

    return RunResults(
        metadata=metadata(
            git_sha="fedcba9876543210fedcba9876543210fedcba98",
            git_branch="main",
            started_at="2025-01-01T00:00:00Z",
        ),
        scenarios=(
            PASSED,
            replace(
                FAILED,
                status="passed",
                attempts=(Attempt("passed", verdicts=verdicts_for("passed")),),
            ),
            REPEATED,
            QUARANTINED,
            SKIPPED,
            replace(
                FIXED,
                status="failed",
                attempts=(Attempt("failed", verdicts=verdicts_for("failed")),),
            ),
            REMOVED,
        ),
    )


def scenario(label: str, status: str = "passed", **kw: object) -> ScenarioResult:
    """A minimal scenario for tests that need many of them."""
    values: dict[str, object] = {
        "scenario_id": f"SCN_{label.replace(' ', '_')}",
        "label": label,
        "group_id": "SCNG_bulk",
        "group_name": "Bulk",
        "file": "evals/bulk.yaml",
        "line": 1,
        "status": status,
        "attempts": (Attempt(status=status, verdicts=verdicts_for(status)),),
        "duration_seconds": 1.0,
    }
    values.update(kw)
    return ScenarioResult(**values)


def results_of(*scenarios: ScenarioResult) -> RunResults:
    """A run made of these scenarios."""
    return RunResults(metadata=metadata(), scenarios=tuple(scenarios))


def main_results(*scenarios: ScenarioResult) -> RunResults:
    """A run of main made of these scenarios: another run than :func:`results_of`'s (a
    baseline cannot be the run it gates)."""
    meta = metadata(started_at="2025-01-01T00:00:00Z", git_sha="f" * 40, git_branch="main")
    return RunResults(metadata=meta, scenarios=tuple(scenarios))


def write_results(results: RunResults, path: str | Path) -> None:
    """Write a results file as ``lkeval run`` does (its JSON, atomically, 0644)."""
    write_text(path, dump_results(results))
