"""The JSON Schema editors use accepts what the loader accepts and refuses its grammar errors."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from conftest import TEST_DATA

from lkeval.scenarios.loader import GROUP_KEYS, JUDGE_NAMES, SCENARIO_KEYS, SCHEMA_PATH
from lkeval.scenarios.turns import EVENT_CHECK_FIELDS, EXPECTATION_KEYS, TURN_KEYS

DATA = TEST_DATA / "scenarios"
SCHEMA = json.loads(SCHEMA_PATH.read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())


def test_schema_is_valid_draft_2020_12() -> None:
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("path", sorted((DATA / "valid").glob("*.yaml")), ids=lambda p: p.name)
def test_valid_fixtures_match_the_schema(path: Path) -> None:
    VALIDATOR.validate(yaml.safe_load(path.read_text()))


@pytest.mark.parametrize("path", sorted((DATA / "invalid").glob("*.yaml")), ids=lambda p: p.name)
def test_invalid_fixtures_fail_the_schema(path: Path) -> None:
    assert not VALIDATOR.is_valid(yaml.safe_load(path.read_text()))


def scenario(**extra: object) -> dict[str, object]:
    return {"scenarios": [{"label": "A", **extra}]}


@pytest.mark.parametrize(
    "document",
    [
        {"name": "no scenarios key"},
        {"scenarios": [{"label": ""}]},
        scenario(tags={"difficulty": 1}),
        scenario(userdata=[1]),
        scenario(turns=[{"user": "hi"}, {"expect": []}]),
        scenario(turns=[{"user": "hi", "expect": [{"message": {}, "skip": 1}]}]),
        scenario(turns=[{"user": "hi", "expect": [{"contains": {"skip": 1}}]}]),
        scenario(turns=[{"user": "hi", "expect": [{"message": {"role": "system"}}]}]),
        scenario(turns=[{"user": "hi", "expect": [{"message": {"matches": "(["}}]}]),
        scenario(turns=[{"user": "hi", "expect": [{"no_more_events": False}]}]),
        scenario(repeat=0),
        scenario(turn_timeout=0),
        scenario(impair=3),
    ],
)
def test_schema_refuses_what_the_loader_refuses(document: dict[str, object]) -> None:
    assert not VALIDATOR.is_valid(document)


def test_unknown_keys_are_allowed_where_lk_ignores_them() -> None:
    assert VALIDATOR.is_valid({"scenarios": [{"label": "A", "owner": "me"}], "team": "voice"})


def test_schema_and_loader_agree_on_the_grammar() -> None:
    defs = SCHEMA["$defs"]
    assert set(SCHEMA["properties"]) == set(GROUP_KEYS)
    assert set(defs["scenario"]["properties"]) == set(SCENARIO_KEYS)
    assert set(defs["first_turn"]["properties"]) == set(TURN_KEYS)
    assert set(defs["expectation"]["properties"]) == set(EXPECTATION_KEYS)
    for kind, fields in EVENT_CHECK_FIELDS.items():
        assert set(defs[kind]["properties"]) == set(fields), kind
    assert defs["scenario"]["properties"]["judges"]["items"]["enum"] == list(JUDGE_NAMES)


def test_schema_describes_every_property() -> None:
    def walk(node: object, where: str) -> None:
        if isinstance(node, dict):
            for name, prop in node.get("properties", {}).items():
                assert "description" in prop, f"{where}.{name}"
            for key, value in node.items():
                walk(value, f"{where}.{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{where}[{index}]")

    walk(SCHEMA, "schema")
