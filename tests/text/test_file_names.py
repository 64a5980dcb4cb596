"""The scenario-id-to-file-name rule, written once: the attempt's log and its cassette are named
by the same stem, so what the log of an attempt says and the cassette it replayed match."""

from __future__ import annotations

from pathlib import Path

from lkeval.agents.process import AgentLaunch
from lkeval.replay.cassette import cassette_name
from lkeval.run.attempt import RunSettings, ScenarioAttempt
from lkeval.scenarios.model import Scenario
from lkeval.text.file_names import attempt_stem, file_stem


def test_a_scenario_id_becomes_a_safe_bounded_stem() -> None:
    assert file_stem("hotel/books a room: 2 nights") == "hotel_books_a_room__2_nights"
    assert file_stem("../../etc/passwd") == ".._.._etc_passwd"
    assert len(file_stem("x" * 500)) == 120


def test_later_attempts_carry_their_number() -> None:
    assert attempt_stem("a/b", 1) == "a_b"
    assert attempt_stem("a/b", 3) == "a_b.3"


def test_the_log_and_the_cassette_of_an_attempt_share_the_stem(tmp_path: Path) -> None:
    scenario = Scenario(
        "L", "You are Ada.", "Books it.", "s.yaml", 1, "G", "Hotel", "weird id/with: é", False
    )
    settings = RunSettings(AgentLaunch(tmp_path / "agent.py"), tmp_path, tmp_path)
    for attempt_no in (1, 2):
        attempt = ScenarioAttempt(scenario, settings, None, "run", attempt_no)
        stem = attempt_stem(scenario.id, attempt_no)
        assert attempt.log_path == tmp_path / f"{stem}.log"
        assert cassette_name(scenario.id, attempt_no) == f"{stem}.json"
