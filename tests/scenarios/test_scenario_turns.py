"""lk-eval's turn grammar is strict: every typo or wrong shape is an error at its line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from lkeval.scenarios.loader import load_scenario_file
from lkeval.scenarios.model import Expectation, Turn

# Lines 1-4; the turn under test starts on line 5, its first expectation on line 7.
HEAD = "scenarios:\n  - label: A\n    instructions: hi\n    turns:\n"
E = "scenarios[0].turns[0].expect[0]"
X = "- user: hi\n  expect:\n    "


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
    assert found == [
        "s.yaml:5:9: warning: scenarios[0].turns[0]: "
        "a greeting turn without 'expect:' checks nothing"
    ]


# (turns, "line:column field: message start"); X stands for "- user: hi / expect:".
TURN_ERRORS = [
    ("- hello\n", "5:9 scenarios[0].turns[0]: a turn must be a mapping"),
    (
        "- user: hi\n  usr: again\n",
        "6:9 scenarios[0].turns[0].usr: unknown key 'usr' (did you mean 'user'?)",
    ),
    ("- user: ''\n", "5:15 scenarios[0].turns[0].user: must not be empty"),
    (
        "- user: 42\n",
        "5:15 scenarios[0].turns[0].user: must be a string, got a number (42); quote it",
    ),
    (
        "- user: hi\n- expect: []\n",
        "6:9 scenarios[0].turns[1].user: missing required field (only the first turn",
    ),
    (
        "- user: hi\n  expect: {message: {}}\n",
        "6:17 scenarios[0].turns[0].expect: must be a list of expectations",
    ),
    (X + "- {}\n", f"7:13 {E}: empty expectation; use one key of: message"),
    (X + "- message\n", f"7:13 {E}: an expectation must be a mapping with one key of: message"),
    (
        X + "- mesage: {}\n",
        f"7:13 {E}.mesage: unknown expectation 'mesage' (did you mean 'message'?)",
    ),
    (
        X + "- {message: {}, skip: 1}\n",
        f"7:13 {E}: an expectation takes exactly one key, found 2: message, skip",
    ),
    (
        X + "- message: {contians: x}\n",
        f"7:23 {E}.message.contians: unknown key 'contians' (did you mean 'contains'?); "
        "allowed: role, contains, matches, intent",
    ),
    (X + "- message: {role: system}\n", f"7:29 {E}.message.role: must be one of: assistant, user"),
    (
        X + "- message: {matches: '(['}\n",
        f"7:32 {E}.message.matches: invalid regular expression: unterminated character set",
    ),
    (
        X + "- message: {contains: [ok, 3]}\n",
        f"7:38 {E}.message.contains[1]: must be a string, got a number (3)",
    ),
    (X + "- message: {intent: ''}\n", f"7:31 {E}.message.intent: must not be empty"),
    (
        X + "- message: hello\n",
        f"7:22 {E}.message: must be a mapping of role, contains, matches, intent (or empty)",
    ),
    (
        X + "- function_call: {name: f, arguments: [1]}\n",
        f"7:49 {E}.function_call.arguments: must be a mapping of argument names to values",
    ),
    (
        X + "- function_call_output: {is_error: maybe}\n",
        f"7:46 {E}.function_call_output.is_error: must be true or false",
    ),
    (
        X + "- handoff: {agent: Sales}\n",
        f"7:23 {E}.handoff.agent: unknown key 'agent'; allowed: to",
    ),
    (
        X + "- skip: false\n",
        f"7:19 {E}.skip: must be a whole number of at least 1, got a boolean (false)",
    ),
    (
        X + "- no_more_events: false\n",
        f"7:29 {E}.no_more_events: must be true, got a boolean (false)",
    ),
    (
        X + "- contains: {skip: 1}\n",
        f"7:24 {E}.contains.skip: 'skip' cannot be used inside 'contains'",
    ),
    (
        X + "- contains: {mesage: {}}\n",
        f"7:24 {E}.contains.mesage: unknown expectation 'mesage' (did you mean 'message'?)",
    ),
    (
        X + "- contains: [message]\n",
        f"7:23 {E}.contains: must be a mapping with one key of: message",
    ),
]


@pytest.mark.parametrize(("turns", "expected"), TURN_ERRORS)
def test_turn_grammar_errors(turns: str, expected: str, tmp_path: Path) -> None:
    _, found = load(turns, tmp_path)
    location, _, rest = expected.partition(" ")
    errors = [m for m in found if ": error: " in m]
    assert len(errors) == 1 and errors[0].startswith(f"s.yaml:{location}: error: {rest}"), found


def test_turns_must_be_a_list(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD.replace("turns:\n", "turns: {user: hi}\n"))
    assert [d.message for d in load_scenario_file(path)[1] if d.is_error] == [
        "must be a list of turns (- user: ...), got a mapping"
    ]
