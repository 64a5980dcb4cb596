"""The scenario handed to the agent, and which scenarios a run selects."""

from __future__ import annotations

import json

import pytest
from google.protobuf import json_format
from livekit.protocol import agent_simulation as sim_pb

from lkeval.cli.options import parse_tag_selector
from lkeval.run.attempt import dispatch_json
from lkeval.scenarios.model import Scenario, Selection


def _scenario(**extra: object) -> Scenario:
    base: dict = dict(
        label="Books a room",
        instructions="You are Ada.",
        agent_expectations="Books it.",
        file="s.yaml",
        line=3,
        group_id="G",
        group_name="Hotel",
        id="hotel/books-a-room",
        id_derived=True,
        tags={"feature": "booking"},
    )
    base.update(extra)
    return Scenario(**base)


def _parse(text: str) -> sim_pb.SimulationDispatch:
    # as livekit's JobContext.simulation_context() parses the job attribute
    return json_format.Parse(text, sim_pb.SimulationDispatch(), ignore_unknown_fields=True)


def test_dispatch_carries_the_scenario_as_livekit_reads_it() -> None:
    dispatch = _parse(
        dispatch_json(_scenario(userdata={"guest": {"name": "Ada"}}), "run-1", "job-1")
    )
    assert dispatch.simulation_run_id == "run-1" and dispatch.job_id == "job-1"
    assert dispatch.mode == sim_pb.SimulationMode.SIMULATION_MODE_TEXT
    assert dispatch.scenario.label == "Books a room"
    assert dict(dispatch.scenario.tags) == {"feature": "booking"}
    assert json.loads(dispatch.scenario.userdata) == {"guest": {"name": "Ada"}}


def test_missing_userdata_is_an_empty_string_not_null() -> None:
    dispatch = _parse(dispatch_json(_scenario(), "run-1", "job-1"))
    assert dispatch.scenario.userdata == ""
    assert "null" not in dispatch_json(_scenario(), "run-1", "job-1")


def test_selection_by_tags_and_patterns() -> None:
    s = _scenario()
    assert Selection().selects(s)
    assert Selection(tags=(("feature", "booking"),)).selects(s)
    assert not Selection(tags=(("feature", "booking"), ("difficulty", "1"))).selects(s)
    assert Selection(patterns=("BOOKS*",)).selects(s)  # label, case-insensitive
    assert Selection(patterns=("nope", "hotel/*")).selects(s)  # any pattern, on the id
    assert not Selection(patterns=("nope",)).selects(s)


def test_tag_selector_parsing() -> None:
    assert parse_tag_selector(" flaky = true ") == ("flaky", "true")
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_tag_selector("flaky")
