"""Scenario files: LiveKit's format loads unchanged, and every mistake is named by file:line."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import jsonschema
import pytest
import yaml
from conftest import TEST_DATA

from lkeval.scenarios.loader import (
    SCHEMA_PATH,
    Diagnostic,
    ScenarioFileError,
    load_or_raise,
    load_scenario_file,
    load_scenario_files,
    summarize,
)
from lkeval.scenarios.model import Expectation, Limits, Turn

DATA = TEST_DATA / "scenarios"
VALID = sorted((DATA / "valid").glob("*.yaml"))
INVALID = sorted((DATA / "invalid").glob("*.yaml"))
TAB = "tab character in indentation; YAML allows only spaces"
HEAD = "scenarios:\n  - label: A\n    instructions: hi\n"  # lines 1-3 of most inline files


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Relative file names keep the expected "s.yaml:3:5: ..." strings exact.
    monkeypatch.chdir(tmp_path)


def write(text: str, name: str = "s.yaml") -> str:
    Path(name).write_text(textwrap.dedent(text))
    return name


def messages(text: str) -> list[str]:
    return [str(d) for d in load_scenario_file(write(text))[1]]


def as_error(expected: str) -> str:
    """ "4:9 field: message" → "s.yaml:4:9: error: field: message" (keeps the tables short)."""
    location, _, rest = expected.partition(" ")
    return f"s.yaml:{location}: error: {rest}"


# --- files that must load ---------------------------------------------------------------------


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_valid_fixtures_load_cleanly(path: Path) -> None:
    group, diagnostics = load_scenario_file(path)
    assert diagnostics == []
    assert group.scenarios


def test_livekit_file_in_the_design_style() -> None:
    group, _ = load_scenario_file(DATA / "valid" / "room_booking.yaml")
    assert (group.id, group.name) == ("SCNG_9nF2kQwPbXtR", "Room booking")
    first, second, third = group.scenarios
    assert (first.id, first.id_derived, first.line, first.group_id) == (
        "SCN_4mTvH7yLdKpZ",
        False,
        6,
        "SCNG_9nF2kQwPbXtR",
    )
    assert first.instructions.startswith("You are Maria Lopez, travelling for a conference.\n")
    assert "\n\nBe polite but brief." in first.instructions
    assert first.agent_expectations.endswith("with a reference number.\n")
    assert "\n" not in first.agent_expectations.rstrip()  # '>' folds lines
    assert first.tags == {"feature": "room_booking", "difficulty": "1"}
    assert first.userdata == {
        "guest": {"name": "Maria Lopez", "email": "maria@example.com", "loyalty": None},
        "expected_state": [{"room": "double", "nights": 2, "check_in": "2025-03-03"}],
        "flags": ["vip", "late_checkout"],
    }
    assert not first.turns and first.limits == Limits() and first.judges == ()
    assert second.tags == {"feature": "cancellation", "difficulty": "2"}
    assert third.label == "Asks about parking: quoted label with a colon"
    assert third.userdata is None and third.agent_expectations == ""


def test_file_without_name_or_ids_derives_ids_from_file_stem_and_label() -> None:
    group, _ = load_scenario_file(DATA / "valid" / "no_ids.yaml")
    assert group.name == "no_ids" and group.id == ""
    assert [(s.id, s.id_derived) for s in group.scenarios] == [
        ("no-ids/asks-for-the-weather", True),
        ("no-ids/small-talk", True),
    ]


def test_scripted_turns_map_to_expectations() -> None:
    group, _ = load_scenario_file(DATA / "valid" / "frontdesk_scripted.yaml")
    greet, simulated, outputs = group.scenarios
    assert greet.turns == (
        Turn(None, (Expectation("message", 11, intent="greets the caller and offers help"),), 10),
        Turn(
            "I'd like a table for two at 7pm tonight.",
            (
                Expectation(
                    "function_call",
                    14,
                    name="book_table",
                    arguments={"party_size": 2, "time": "19:00"},
                ),
                Expectation(
                    "function_call_output",
                    17,
                    name="book_table",
                    output_contains="confirmed",
                    is_error=False,
                ),
                Expectation(
                    "message", 18, contains=("booked", "7"), matches="(?i)table for (two|2)"
                ),
                Expectation("no_more_events", 21),
            ),
            12,
        ),
        Turn(
            "Actually, can I talk to billing?",
            (
                Expectation("handoff", 24, anywhere=True, to="BillingAgent"),
                Expectation("skip", 25, count=1),
                Expectation("message", 26),
            ),
            22,
        ),
    )
    assert greet.limits == Limits(boot_timeout=30.0, turn_timeout=60.5)
    assert (greet.repeat, greet.min_pass) == (3, 2)
    assert greet.judges == ("task_completion", "tool_use")
    assert greet.instructions == ""
    assert simulated.limits == Limits(max_turns=4) and simulated.turns == ()
    assert [e.kind for e in outputs.turns[0].expect] == [
        "function_call",
        "function_call_output",
        "handoff",
        "skip",
        "message",
    ]
    assert outputs.turns[0].expect[1].output == "An internal error occurred"
    assert outputs.turns[0].expect[3].count == 2


def _real_world_file(count: int) -> str:
    """A file like the ones LiveKit users keep: many scenarios, long block scalars, no ids."""
    parts = ["name: Hotel receptionist", "scenarios:"]
    for i in range(count):
        persona = "\n".join(
            f"      Line {n} of the persona of guest {i}: be specific." for n in range(20)
        )
        parts.append(
            f"  - label: 'Guest {i}: books room {100 + i}'\n"
            f"    instructions: |\n{persona}\n"
            f"    agent_expectations: >\n"
            f"      The agent books room {100 + i} for guest {i},\n"
            f"      confirms the dates and gives a reference.\n"
            f"    tags: {{feature: booking, difficulty: '{i % 3 + 1}', priority: '1'}}\n"
            f"    userdata:\n"
            f"      guest: {{name: Guest {i}, nights: {i % 4 + 1}, vip: {i % 2 == 0}}}\n"
            f"      expected_state:\n"
            f"        - {{room: '{100 + i}', status: booked, extras: [breakfast, parking]}}\n"
            f"        - {{room: null, status: pending}}\n"
        )
    return "\n".join(parts)


def test_hundred_scenario_livekit_file_loads_clean() -> None:
    path = write(_real_world_file(100))
    group, diagnostics = load_scenario_file(path)
    assert diagnostics == []
    assert len(group.scenarios) == 100 and len({s.id for s in group.scenarios}) == 100
    last = group.scenarios[-1]
    assert last.id == "hotel-receptionist/guest-99-books-room-199" and last.id_derived
    assert last.instructions.count("\n") == 20
    assert last.agent_expectations == (
        "The agent books room 199 for guest 99, confirms the dates and gives a reference.\n"
    )
    assert last.tags == {"feature": "booking", "difficulty": "1", "priority": "1"}
    assert last.userdata is not None and last.userdata["expected_state"][1]["room"] is None
    # ... and editors using the schema accept it too.
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator(schema).validate(yaml.safe_load(Path(path).read_text()))


# --- files that must not load -----------------------------------------------------------------


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_fixtures_fail_at_the_marked_line(path: Path) -> None:
    marker = re.match(r"# expect-error: (\d+) (\S+)", path.read_text())
    assert marker, "invalid fixtures start with '# expect-error: LINE FIELD'"
    _, diagnostics = load_scenario_file(path)
    errors = [(d.line, d.field) for d in diagnostics if d.is_error]
    assert errors == [(int(marker[1]), marker[2])]


FILE_ERRORS = [
    ("", "1 file is empty"),
    ("# only a comment\n", "1 file is empty"),
    ("- label: A\n", "1:1 the file must be a mapping with a 'scenarios:' list, got a list; put"),
    ("name: X\n", "1:1 scenarios: missing required field"),
    (
        "scenarios:\n  - label: [a, b\n    instructions: x\n",
        "3:17 YAML syntax error: expected ',' or ']', but got ':' "
        "(while parsing a flow sequence at line 2)",
    ),
    ("scenarios:\n  - label: A\n\tinstructions: x\n", f"3:1 {TAB}"),
    ("scenarios:\n  - label: A\n    \tinstructions: x\n", f"3:5 {TAB}"),
    ("a: 1\n---\nb: 2\n", "2:1 YAML syntax error: but found another document"),
    # a key one space short or two deep: the parser's words, then what to look at
    (
        "name: x\nscenarios:\n  - label: a\n    instructions: hi\n   agent_expectations: y\n",
        "5:4 YAML syntax error: expected <block end>, but found '<block mapping start>' "
        "(while parsing a block collection at line 3); check the indentation: line 5 has 3 "
        "spaces, line 4 above it has 4",
    ),
    (
        "name: x\nscenarios:\n  - label: a\n    instructions: hi\n      agent_expectations: y\n",
        "5:25 YAML syntax error: mapping values are not allowed here; check the indentation: "
        "line 5 has 6 spaces, line 4 above it has 4",
    ),
]


@pytest.mark.parametrize(("text", "expected"), FILE_ERRORS)
def test_file_level_errors(text: str, expected: str) -> None:
    Path("s.yaml").write_text(text)
    found = [str(d) for d in load_scenario_file("s.yaml")[1]]
    assert len(found) == 1 and found[0].startswith(as_error(expected)), found


def test_unreadable_files() -> None:
    Path("d.yaml").mkdir()
    Path("bad.yaml").write_bytes(b"scenarios:\n  - label: caf\xe9\n")
    _, diagnostics = load_scenario_files(["missing.yaml", "d.yaml", "bad.yaml"])
    assert [str(d) for d in diagnostics] == [
        "missing.yaml: error: file not found",
        "d.yaml: error: is a directory; give the scenarios.yaml file itself",
        "bad.yaml:2: error: not UTF-8 text (byte 0xe9)",
    ]


SCENARIO_ERRORS = [
    ("scenarios: {a: 1}\n", "1:12 scenarios: must be a list of scenarios, got a mapping"),
    ("scenarios:\n  - just text\n", "2:5 scenarios[0]: a scenario must be a mapping"),
    ("scenarios:\n  - instructions: hi\n", "2:5 scenarios[0].label: missing required field"),
    ("scenarios:\n  - label: ''\n", "2:12 scenarios[0].label: must not be empty"),
    (
        "scenarios:\n  - label: 2024\n",
        "2:12 scenarios[0].label: must be a string, got a number (2024); quote it: '2024'",
    ),
    (
        HEAD.replace("hi", "[a, b]"),
        "3:19 scenarios[0].instructions: must be a string, got a list",
    ),
    (
        HEAD + "    agent_expectations: {a: 1}\n",
        "4:25 scenarios[0].agent_expectations: must be a string, got a mapping",
    ),
    (HEAD + "    id: 7\n", "4:9 scenarios[0].id: must be a string, got a number (7)"),
    (HEAD + "    tags: [a]\n", "4:11 scenarios[0].tags: must be a mapping of names to strings"),
    (HEAD + "    tags: {team: [a]}\n", "4:18 scenarios[0].tags.team: must be a string, got a list"),
    (HEAD + "    userdata: [1, 2]\n", "4:15 scenarios[0].userdata: must be a mapping, got a list"),
    (HEAD + "    userdata: {x: .nan}\n", "4:19 scenarios[0].userdata.x: .nan has no JSON form"),
    (HEAD + "    label: B\n", "4:5 scenarios[0].label: duplicate key (first at line 2)"),
    (HEAD + "    boot_timeout: 0\n", "4:19 scenarios[0].boot_timeout: must be a positive number"),
    (HEAD + "    turn_timeout: x\n", "4:19 scenarios[0].turn_timeout: must be a positive number"),
    (HEAD + "    max_turns: 2.5\n", "4:16 scenarios[0].max_turns: must be a whole number from 1"),
    (HEAD + "    repeat: 0\n", "4:13 scenarios[0].repeat: must be a whole number from 1 to 1000"),
    (
        HEAD + "    repeat: 2\n    min_pass: 3\n",
        "5:15 scenarios[0].min_pass: must not exceed repeat (2)",
    ),
    (HEAD + "    judges: accuracy\n", "4:13 scenarios[0].judges: must be a list of judge names"),
    (
        HEAD + "    judges: [safty]\n",
        "4:14 scenarios[0].judges[0]: unknown judge 'safty' (did you mean 'safety'?)",
    ),
]


@pytest.mark.parametrize(("text", "expected"), SCENARIO_ERRORS)
def test_scenario_field_errors(text: str, expected: str) -> None:
    found = [m for m in messages(text) if ": error: " in m]
    assert len(found) == 1 and found[0].startswith(as_error(expected)), found


def test_all_errors_of_a_file_are_reported_at_once() -> None:
    text = HEAD + "    repeat: 0\n  - instructions: no label\n  - label: B\n    tags: {a: [1]}\n"
    found = [m for m in messages(text) if ": error: " in m]
    assert [m.split(": error: ")[0] for m in found] == ["s.yaml:4:13", "s.yaml:5:5", "s.yaml:7:15"]


def test_warnings_unknown_keys_tag_conversion_and_empty_scenarios() -> None:
    text = """\
        name: X
        owner: me
        scenarios:
          - label: A
            instructions: hi
            notes: []
            tags: {difficulty: 1, live: true, owner: ~, team: voice}
            judges: [accuracy, accuracy]
          - label: B
    """
    group, diagnostics = load_scenario_file(write(text))
    assert all(not d.is_error for d in diagnostics)
    assert [str(d) for d in diagnostics] == [
        "s.yaml:2:1: warning: owner: unknown key 'owner'",
        "s.yaml:6:5: warning: scenarios[0].notes: unknown key 'notes'",
        "s.yaml:7:24: warning: scenarios[0].tags.difficulty: LiveKit tags are strings; "
        "read a number (1) as '1' (quote it)",
        "s.yaml:7:33: warning: scenarios[0].tags.live: LiveKit tags are strings; "
        "read a boolean (true) as 'true' (quote it)",
        "s.yaml:7:46: warning: scenarios[0].tags.owner: has no value; using an empty string",
        "s.yaml:8:24: warning: scenarios[0].judges[1]: judge 'accuracy' listed twice",
        "s.yaml:9:5: warning: scenarios[1]: neither 'turns' nor 'instructions': "
        "the simulated user has no script",
    ]
    first = group.scenarios[0]
    assert first.tags == {"difficulty": "1", "live": "true", "owner": "", "team": "voice"}
    assert first.judges == ("accuracy",)
    assert [str(d) for d in load_scenario_file(write("scenarios: []\n"))[1]] == [
        "s.yaml:1:12: warning: scenarios: no scenarios in this file"
    ]


def test_merge_keys_and_anchors_are_honoured() -> None:
    text = """\
        defaults: &base
          instructions: shared persona
          tags: {team: voice}
        scenarios:
          - <<: *base
            label: A
          - <<: *base
            label: B
            tags: {team: billing}
    """
    group, diagnostics = load_scenario_file(write(text))
    assert [d.severity for d in diagnostics] == ["warning"]  # the unknown 'defaults' key
    assert [(s.instructions, s.tags["team"]) for s in group.scenarios] == [
        ("shared persona", "voice"),
        ("shared persona", "billing"),
    ]


# --- ids --------------------------------------------------------------------------------------


def test_duplicate_ids_within_a_file_name_both_lines() -> None:
    text = HEAD + "    id: S1\n  - label: B\n    instructions: hi\n    id: S1\n"
    assert [m for m in messages(text) if "error" in m] == [
        "s.yaml:7:9: error: scenarios[1].id: duplicate scenario id 'S1' (also at s.yaml:4)"
    ]


def test_duplicate_derived_ids_suggest_adding_an_id() -> None:
    text = "name: Desk\nscenarios:\n  - label: Book!\n    instructions: a\n"
    text += "  - label: book\n    instructions: b\n"
    assert messages(text) == [
        "s.yaml:5:12: error: scenarios[1].label: same group name and label as the scenario at "
        "s.yaml:3, so both get the id 'desk/book'; add a unique 'id:' to one of them"
    ]


def test_duplicate_ids_across_files() -> None:
    write("scenarios:\n  - id: S1\n    label: A\n    instructions: a\n", "a.yaml")
    write("scenarios:\n  - label: B\n    instructions: b\n  - id: S1\n    label: C\n", "b.yaml")
    Path("b.yaml").write_text(Path("b.yaml").read_text() + "    instructions: c\n")
    groups, diagnostics = load_scenario_files(["a.yaml", "b.yaml", "./a.yaml"])
    assert len(groups) == 2
    assert [str(d) for d in diagnostics] == [
        "b.yaml:4:9: error: scenarios[1].id: duplicate scenario id 'S1' (also at a.yaml:2)",
        "./a.yaml: warning: same file as a.yaml; loaded once",
    ]


@pytest.mark.parametrize(
    ("first", "second"),
    [("a/b", "a:b"), ("book", "book.2"), ("book.2", "book"), ("x" * 130, "x" * 121)],
)
def test_two_ids_that_would_share_their_log_and_cassette_are_an_error(
    first: str, second: str
) -> None:
    """An attempt's log and cassette are named from its scenario id (``a/b`` and ``a:b`` are
    both ``a_b``; ``book``'s second attempt is ``book.2``, as is ``book.2``'s first)."""
    text = f"scenarios:\n  - id: '{first}'\n    label: A\n    instructions: a\n"
    text += f"  - id: '{second}'\n    label: B\n    instructions: b\n"
    errors = [m for m in messages(text) if "error" in m]
    assert errors == [
        f"s.yaml:5:9: error: scenarios[1].id: scenario id '{second}' would share its log and "
        f"cassette files with '{first}' (at s.yaml:2): change one of the two ids"
    ]


def test_ids_whose_files_differ_load() -> None:
    text = "scenarios:\n  - id: book.2\n    label: A\n    instructions: a\n"
    text += "  - id: book.3\n    label: B\n    instructions: b\n"
    assert [m for m in messages(text) if "error" in m] == []


def test_same_file_stem_in_two_folders_collides_on_derived_ids() -> None:
    for folder in ("x", "y"):
        Path(folder).mkdir()
        write("scenarios:\n  - label: Greeting\n    instructions: hi\n", f"{folder}/scenarios.yaml")
    _, diagnostics = load_scenario_files(["x/scenarios.yaml", "y/scenarios.yaml"])
    assert [d.field for d in diagnostics] == ["scenarios[0].label"]
    assert "add a unique 'id:'" in diagnostics[0].message


# --- API --------------------------------------------------------------------------------------


def test_diagnostic_str_forms() -> None:
    assert str(Diagnostic("f.yaml", 3, 7, "scenarios[3].label", "missing required field")) == (
        "f.yaml:3:7: error: scenarios[3].label: missing required field"
    )
    assert str(Diagnostic("f.yaml", 3, None, "", "oops", "warning")) == "f.yaml:3: warning: oops"
    assert (
        str(Diagnostic("f.yaml", None, None, "", "file not found"))
        == "f.yaml: error: file not found"
    )


NEAR_MISSES = [
    ("agent_expectation", "agent_expectations"),
    ("instruction", "instructions"),
    ("user_data", "userdata"),
    ("userData", "userdata"),
    ("turn", "turns"),
    ("tunrs", "turns"),
    ("tag", "tags"),
    ("judge", "judges"),
    ("min_passes", "min_pass"),
    ("boot-timeout", "boot_timeout"),
]


@pytest.mark.parametrize(("key", "meant"), NEAR_MISSES)
def test_a_near_miss_of_a_known_key_is_an_error(key: str, meant: str) -> None:
    """A typo would drop the check the key holds; LiveKit would ignore it silently."""
    assert messages(HEAD + f"    {key}: x\n") == [
        f"s.yaml:4:5: error: scenarios[0].{key}: unknown key '{key}' (did you mean '{meant}'?); "
        "a misspelt key would silently drop what it holds"
    ]


def test_near_misses_of_group_keys_are_errors_and_other_keys_warnings() -> None:
    found = messages("nmae: X\nowner: me\nexpectations: x\n" + HEAD + "    persona: x\n")
    assert found == [
        "s.yaml:1:1: error: nmae: unknown key 'nmae' (did you mean 'name'?); "
        "a misspelt key would silently drop what it holds",
        "s.yaml:2:1: warning: owner: unknown key 'owner'",
        "s.yaml:3:1: warning: expectations: unknown key 'expectations'",
        "s.yaml:7:5: warning: scenarios[0].persona: unknown key 'persona'",
    ]


def test_load_or_raise() -> None:
    write("scenarios:\n  - label: A\n    instructions: hi\n    notes: []\n", "ok.yaml")
    groups, warnings = load_or_raise(["ok.yaml"])
    assert len(groups) == 1 and [d.severity for d in warnings] == ["warning"]
    write("scenarios:\n  - instructions: hi\n", "bad.yaml")
    with pytest.raises(ScenarioFileError) as caught:
        load_or_raise(["ok.yaml", "bad.yaml"])
    assert [d.severity for d in caught.value.diagnostics] == ["warning", "error"]
    assert "bad.yaml:2:5: error: scenarios[0].label: missing required field" in str(caught.value)


def test_summarize_golden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(DATA)
    groups, diagnostics = load_scenario_files(
        ["valid/room_booking.yaml", "valid/frontdesk_scripted.yaml", "valid/no_ids.yaml"]
    )
    assert summarize(groups, diagnostics) == textwrap.dedent(
        """\
        valid/room_booking.yaml: Room booking (SCNG_9nF2kQwPbXtR)
          3 scenarios: 0 scripted (0 turns, 0 expectations), 3 simulated user only
          1 with nothing to check, not played: Asks about parking: quoted label with a colon
        valid/frontdesk_scripted.yaml: Front desk
          3 scenarios: 2 scripted (4 turns, 13 expectations), 1 simulated user only
        valid/no_ids.yaml: no_ids
          2 scenarios: 0 scripted (0 turns, 0 expectations), 2 simulated user only
          2 without 'id:' (ids derived from group name and label)
        OK: 3 files, 8 scenarios"""
    )
