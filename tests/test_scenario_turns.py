"""lk-eval's turn grammar is strict: every typo or wrong shape is an error at its line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from lkeval.scenario import Expectation, Turn
from lkeval.scenario_loader import load_scenario_file

# Lines 1-4; the turn under test starts on line 5, its first expectation on line 7.
HEAD = "scenarios:\n  - label: A\n    instructions: hi\n    turns:\n"
E = "scenarios[0].turns[0].expect[0]"


def load(turns: str, tmp_path: Path) -> tuple[tuple[Turn, ...], list[str]]:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + textwrap.indent(textwrap.dedent(turns), "      "))
    group, diagnostics = load_scenario_file(path)
    found = [str(d).replace(f"{path}:", "s.yaml:") for d in diagnostics]
    return (group.scenarios[0].turns if group.scenarios else ()), found


def test_greeting_turn_and_shorthands(tmp_path: Path) -> None:
    turns, found = load(
        """\
        - expect:
            - message:
            - agent_handoff: {to: Sales}
            - contains: {function_call: {name: lookup}}
            - skip: 3
            - no_more_events:
        - user: hi
        """,
        tmp_path,
    )
    assert found == []
    assert turns == (
        Turn(
            None,
            (
                Expectation("message", 6),
                Expectation("handoff", 7, to="Sales"),
                Expectation("function_call", 8, anywhere=True, name="lookup"),
                Expectation("skip", 9, count=3),
                Expectation("no_more_events", 10),
            ),
            5,
        ),
        Turn("hi", (), 11),
    )


def test_greeting_turn_without_expectations_warns(tmp_path: Path) -> None:
    _, found = load("- {}\n- user: hi\n", tmp_path)
    assert found == ["s.yaml:5:9: warning: scenarios[0].turns[0]: a greeting turn without 'expect:' checks nothing"]


TURN_ERRORS = [
    ("- hello\n", "s.yaml:5:9: error: scenarios[0].turns[0]: a turn must be a mapping"),
    ("- user: hi\n  usr: again\n", "s.yaml:6:9: error: scenarios[0].turns[0].usr: unknown key 'usr' (did you mean 'user'?)"),
    ("- user: ''\n", "s.yaml:5:15: error: scenarios[0].turns[0].user: must not be empty"),
    ("- user: 42\n", "s.yaml:5:15: error: scenarios[0].turns[0].user: must be a string, got a number (42); quote it: '42'"),
    ("- user: hi\n- expect: []\n", "s.yaml:6:9: error: scenarios[0].turns[1].user: missing required field (only the first turn may omit it"),
    ("- user: hi\n  expect: {message: {}}\n", "s.yaml:6:17: error: scenarios[0].turns[0].expect: must be a list of expectations"),
    ("- user: hi\n  expect:\n    - {}\n", f"s.yaml:7:11: error: {E}: empty expectation; use one key of: message"),
    ("- user: hi\n  expect:\n    - message\n", f"s.yaml:7:11: error: {E}: an expectation must be a mapping with one key of: message"),
    ("- user: hi\n  expect:\n    - mesage: {}\n", f"s.yaml:7:11: error: {E}.mesage: unknown expectation 'mesage' (did you mean 'message'?)"),
    ("- user: hi\n  expect:\n    - {message: {}, skip: 1}\n", f"s.yaml:7:11: error: {E}: an expectation takes exactly one key, found 2: message, skip"),
    ("- user: hi\n  expect:\n    - message: {contians: x}\n", f"s.yaml:7:22: error: {E}.message.contians: unknown key 'contians' (did you mean 'contains'?); allowed: role, contains, matches, intent"),
    ("- user: hi\n  expect:\n    - message: {role: system}\n", f"s.yaml:7:28: error: {E}.message.role: must be one of: assistant, user"),
    ("- user: hi\n  expect:\n    - message: {matches: '(['}\n", f"s.yaml:7:31: error: {E}.message.matches: invalid regular expression: unterminated character set"),
    ("- user: hi\n  expect:\n    - message: {contains: [ok, 3]}\n", f"s.yaml:7:37: error: {E}.message.contains[1]: must be a string, got a number (3)"),
    ("- user: hi\n  expect:\n    - message: {intent: ''}\n", f"s.yaml:7:30: error: {E}.message.intent: must not be empty"),
    ("- user: hi\n  expect:\n    - message: hello\n", f"s.yaml:7:20: error: {E}.message: must be a mapping of role, contains, matches, intent (or empty)"),
    ("- user: hi\n  expect:\n    - function_call: {name: f, arguments: [1]}\n", f"s.yaml:7:49: error: {E}.function_call.arguments: must be a mapping of argument names to values"),
    ("- user: hi\n  expect:\n    - function_call_output: {is_error: maybe}\n", f"s.yaml:7:46: error: {E}.function_call_output.is_error: must be true or false"),
    ("- user: hi\n  expect:\n    - handoff: {agent: Sales}\n", f"s.yaml:7:22: error: {E}.handoff.agent: unknown key 'agent'; allowed: to"),
    ("- user: hi\n  expect:\n    - skip: false\n", f"s.yaml:7:17: error: {E}.skip: must be a whole number of at least 1, got a boolean (false)"),
    ("- user: hi\n  expect:\n    - no_more_events: false\n", f"s.yaml:7:27: error: {E}.no_more_events: must be true, got a boolean (false)"),
    ("- user: hi\n  expect:\n    - contains: {skip: 1}\n", f"s.yaml:7:22: error: {E}.contains.skip: 'skip' cannot be used inside 'contains'"),
    ("- user: hi\n  expect:\n    - contains: {mesage: {}}\n", f"s.yaml:7:22: error: {E}.contains.mesage: unknown expectation 'mesage' (did you mean 'message'?)"),
    ("- user: hi\n  expect:\n    - contains: [message]\n", f"s.yaml:7:21: error: {E}.contains: must be a mapping with one key of: message"),
]


@pytest.mark.parametrize(("turns", "expected"), TURN_ERRORS)
def test_turn_grammar_errors(turns: str, expected: str, tmp_path: Path) -> None:
    _, found = load(turns, tmp_path)
    errors = [m for m in found if ": error: " in m]
    assert len(errors) == 1 and errors[0].startswith(expected), found


def test_turns_must_be_a_list(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD.replace("turns:\n", "turns: {user: hi}\n"))
    assert [d.message for d in load_scenario_file(path)[1] if d.is_error] == [
        "must be a list of turns (- user: ...), got a mapping"
    ]
