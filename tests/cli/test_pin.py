"""``lkeval pin``: an attempt's conversation becomes a scripted scenario that loads, keeps what
judged it, and turns what the agent did into checks (passed) or comments (failed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lkeval.cli import main
from lkeval.results.model import Attempt, TranscriptItem
from lkeval.scenarios.loader import load_scenario_file
from tests.report_fixtures import msg, results_of, scenario, write_results

SCENARIOS = """\
name: Hotel
scenarios:
  - id: SCN_ada
    label: Ada books a double room
    instructions: You are Ada. Book a double room for two nights.
    agent_expectations: The agent books a double room for Ada.
    userdata: {guest: Ada, expected_booking: {guest: Ada, room_type: double, nights: 2}}
    judges: [task_completion]
"""

CONVERSATION = (
    msg(0, "assistant", "Welcome to Hotel Example! How can I help?"),
    msg(1, "user", "I'd like to book a double room."),
    TranscriptItem(kind="function_call", turn=1, name="transfer_to_booking", arguments="{}"),
    TranscriptItem(kind="agent_handoff", turn=1, old_agent="FrontDesk", new_agent="Booking"),
    msg(1, "assistant", "You are now with our booking desk."),
    msg(2, "user", "Please book it for Ada, two nights."),
    TranscriptItem(
        kind="function_call",
        turn=2,
        name="book_room",
        arguments=json.dumps({"guest_name": "Ada", "room_type": "suite", "nights": 2}),
    ),
    msg(2, "assistant", "All set: a suite for Ada."),
)


def write_run(tmp_path: Path, status: str, reason: str = "") -> Path:
    attempt = Attempt(status=status, reason=reason, transcript=CONVERSATION)
    result = scenario(
        "Ada books a double room",
        status=status,
        scenario_id="SCN_ada",
        file=str(tmp_path / "scenarios.yaml"),
        tags={"feature": "booking"},
        attempts=(Attempt(status="error", reason="boot timeout"), attempt),
    )
    (tmp_path / "scenarios.yaml").write_text(SCENARIOS, encoding="utf-8")
    write_results(results_of(result), tmp_path / "results.json")
    return tmp_path / "results.json"


def pin(tmp_path: Path, *extra: str, into: str = "scenarios.yaml") -> int:
    results = str(tmp_path / "results.json")
    argv = ["pin", "--results", results, "--scenario", "SCN_ada", "--into", str(tmp_path / into)]
    return main([*argv, *extra])


def pinned(path: Path, scenario_id: str = "SCN_ada-pin2"):  # type: ignore[no-untyped-def]
    group, diagnostics = load_scenario_file(path)
    assert [d for d in diagnostics if d.is_error] == []
    return next(s for s in group.scenarios if s.id == scenario_id)


def test_a_failed_attempt_keeps_what_judged_it_and_turns_what_happened_into_comments(
    tmp_path: Path,
) -> None:
    write_run(tmp_path, "failed", "vetoed: expected a double room")
    assert pin(tmp_path) == 0  # the first failed attempt: #2
    text = (tmp_path / "scenarios.yaml").read_text(encoding="utf-8")
    assert text.startswith(SCENARIOS)  # appended, the file as it was kept
    new = pinned(tmp_path / "scenarios.yaml")
    assert [t.user for t in new.turns] == [
        "I'd like to book a double room.",
        "Please book it for Ada, two nights.",
    ]
    assert all(not t.expect for t in new.turns)  # the broken behaviour is not a check
    assert new.userdata == {
        "guest": "Ada",
        "expected_booking": {"guest": "Ada", "room_type": "double", "nights": 2},
    }
    assert new.agent_expectations == "The agent books a double room for Ada."
    assert new.judges == ("task_completion",)
    assert new.tags == {"feature": "booking", "pinned": "true"}
    assert "results.json, scenario SCN_ada, attempt 2: failed (vetoed" in text
    assert '# the attempt: {"function_call": {"name": "book_room", "arguments": ' in text
    assert '"room_type": "suite"' in text
    assert new.line == text.splitlines().index('  - id: "SCN_ada-pin2"') + 1


def test_a_passed_attempt_becomes_checks(tmp_path: Path) -> None:
    write_run(tmp_path, "passed")
    assert pin(tmp_path, "--attempt", "2", "--id", "SCN_ada_kept", into="pinned.yaml") == 0
    new = pinned(tmp_path / "pinned.yaml", "SCN_ada_kept")  # a new file of its own
    first, second = new.turns
    described = [e.describe() if hasattr(e, "describe") else str(e) for e in second.expect]
    assert len(first.expect) == 3 and len(second.expect) == 2, described
    text = (tmp_path / "pinned.yaml").read_text(encoding="utf-8")
    assert '- contains: {"handoff": {"to": "Booking"}}' in text
    assert '"arguments": {"guest_name": "Ada", "room_type": "suite", "nights": 2}' in text
    assert '"intent": "says, in substance: All set: a suite for Ada."' in text


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--scenario", "SCN_adda"], "no such scenario in the results (did you mean 'SCN_ada'?)"),
        (["--attempt", "3"], "--attempt 3: SCN_ada has 2"),
        (["--attempt", "1"], "--attempt 1: no caller line to pin (error: boot timeout)"),
    ],
)
def test_bad_choices_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    write_run(tmp_path, "failed")
    results = str(tmp_path / "results.json")
    base = ["pin", "--results", results, "--scenario", "SCN_ada", "--into", "x.yaml"]
    assert main([*base, *argv]) == 2
    assert says in capsys.readouterr().err


def test_a_file_it_cannot_extend_safely_is_left_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(tmp_path, "failed")
    odd = tmp_path / "odd.yaml"
    odd.write_text(SCENARIOS + "id: SCNG_after_the_list\n", encoding="utf-8")
    assert pin(tmp_path, into="odd.yaml") == 2
    assert "must be the file's last key" in capsys.readouterr().err
    assert odd.read_text(encoding="utf-8") == SCENARIOS + "id: SCNG_after_the_list\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "odd.yaml", "results.json", "scenarios.yaml",
    ]  # fmt: skip
