"""``mock_tools:``: the loader reads every shape with file:line errors, the schema agrees, and
the agent-side mocks answer, fail and refuse as documented (without an agent process)."""

from __future__ import annotations

import asyncio
import inspect
import json
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from lkeval.host import tool_mocks
from lkeval.scenarios.loader import SCHEMA_PATH, load_scenario_file
from lkeval.scenarios.model import MockCase, ToolMock, mock_tools_wire

SCHEMA = json.loads(SCHEMA_PATH.read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
HEAD = "scenarios:\n  - label: A\n    instructions: hi\n    mock_tools:\n"  # lines 1-4


def load(body: str, tmp_path: Path) -> tuple[tuple[ToolMock, ...], list[str]]:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + textwrap.indent(textwrap.dedent(body), "      "))
    group, diagnostics = load_scenario_file(path)
    mocks = group.scenarios[0].mock_tools if group.scenarios else ()
    return mocks, [str(d).removeprefix(f"{path}:") for d in diagnostics]


def test_every_shape_loads_and_reaches_the_agent_as_cases(tmp_path: Path) -> None:
    mocks, problems = load(
        """\
        lookup_order: "Order 42 shipped"
        count_orders: 3
        cancel_order: {error: "the order system is down"}
        get_weather: {output: {sky: sunny, temp: 21}}
        check_table:
          - when: {party_size: 8, terrace: true}
            output: no table for 8
          - output: a table is free
        """,
        tmp_path,
    )
    assert problems == []
    assert [(m.name, m.line) for m in mocks] == [
        ("lookup_order", 5),
        ("count_orders", 6),
        ("cancel_order", 7),
        ("get_weather", 8),
        ("check_table", 9),
    ]
    assert mock_tools_wire(mocks) == {
        "lookup_order": [{"when": None, "output": "Order 42 shipped"}],
        "count_orders": [{"when": None, "output": 3}],
        "cancel_order": [{"when": None, "error": "the order system is down"}],
        "get_weather": [{"when": None, "output": {"sky": "sunny", "temp": 21}}],
        "check_table": [
            {"when": {"party_size": 8, "terrace": True}, "output": "no table for 8"},
            {"when": None, "output": "a table is free"},
        ],
    }


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("lookup:\n", "5:14: error: scenarios[0].mock_tools.lookup: needs an output or an error"),
        (
            "lookup: {sky: sunny}\n",
            "5:16: error: scenarios[0].mock_tools.lookup.sky: unknown key 'sky'",
        ),
        (
            "lookup: {sky: sunny}\n",
            "5:15: error: scenarios[0].mock_tools.lookup: to return a mapping, write it under",
        ),
        (
            "lookup: {output: a, error: b}\n",
            "5:15: error: scenarios[0].mock_tools.lookup: needs exactly one of 'output:' and",
        ),
        ('lookup: {error: ""}\n', "5:23: error: scenarios[0].mock_tools.lookup.error: must not"),
        ("lookup: {error: 3}\n", "5:23: error: scenarios[0].mock_tools.lookup.error: must be a"),
        (
            "lookup: {when: [1], output: a}\n",
            "5:22: error: scenarios[0].mock_tools.lookup.when: must be a mapping of argument",
        ),
        (
            "lookup:\n  - output: a\n  - {when: {id: 1}, output: b}\n",
            "6:11: error: scenarios[0].mock_tools.lookup[0]: a case without 'when:' answers "
            "every call",
        ),
        ("lookup: []\n", "5:15: error: scenarios[0].mock_tools.lookup: needs at least one case"),
        ("lookup: [a]\n", "5:16: error: scenarios[0].mock_tools.lookup[0]: a case must be a"),
        ("look up: a\n", "5:7: error: scenarios[0].mock_tools.look up: not a tool name"),
    ],
)
def test_bad_shapes_are_errors_naming_file_line_and_field(
    tmp_path: Path, body: str, expected: str
) -> None:
    _, problems = load(body, tmp_path)
    assert any(p.startswith(expected) for p in problems), problems


def test_not_a_mapping_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("scenarios:\n  - label: A\n    instructions: hi\n    mock_tools: [a]\n")
    _, diagnostics = load_scenario_file(path)
    assert [d.field for d in diagnostics] == ["scenarios[0].mock_tools"]
    assert diagnostics[0].line == 4 and "mapping of tool names" in diagnostics[0].message


def scenario(mock_tools: object) -> dict[str, object]:
    return {"scenarios": [{"label": "A", "mock_tools": mock_tools}]}


@pytest.mark.parametrize(
    "mocks",
    [
        {"lookup": "text"},
        {"lookup": {"error": "down"}},
        {"lookup": [{"when": {"id": 1}, "output": {"a": 1}}, {"output": None}]},
    ],
)
def test_the_schema_accepts_what_the_loader_accepts(mocks: object) -> None:
    assert VALIDATOR.is_valid(scenario(mocks))


@pytest.mark.parametrize(
    "mocks",
    [
        [1],
        {"lookup": None},
        {"lookup": {"sky": "sunny"}},
        {"lookup": {"output": 1, "error": "x"}},
        {"lookup": {"error": ""}},
        {"lookup": {"when": {}, "output": 1}},
        {"lookup": []},
        {"look up": "a"},
    ],
)
def test_the_schema_refuses_what_the_loader_refuses(mocks: object, tmp_path: Path) -> None:
    assert not VALIDATOR.is_valid(scenario(mocks))
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario(mocks)))
    assert any(d.is_error for d in load_scenario_file(path)[1])


# --- the agent side: how a mock answers -------------------------------------------------------


class RunContext:
    """Stands for livekit's RunContext (matched by name and its function_call)."""

    function_call = None


def real_tool(context: RunContext, party_size: int, terrace: bool = False) -> str:
    raise AssertionError("a mocked tool must not run")


CASES = [
    {"when": {"party_size": 8, "terrace": True}, "output": "no terrace for 8"},
    {"when": {"party_size": 8}, "error": "fully booked"},
    {"when": {"party_size": 2}, "output": {"free": True, "tables": [3, 4]}},
]


def call(mock: Any, *args: Any, **kwargs: Any) -> Any:
    """As LiveKit's ``_run_mock`` calls a mock: bound to the parameters it declares."""
    bound = inspect.signature(mock).bind_partial(*args, **kwargs)
    bound.apply_defaults()
    return mock(*bound.args, **bound.kwargs)


def test_a_mock_answers_from_the_first_matching_case_with_the_tools_parameters() -> None:
    mock = tool_mocks.make_mock("book_table", CASES, real_tool)
    assert inspect.signature(mock) == inspect.signature(real_tool)
    assert call(mock, RunContext(), party_size=8, terrace=True) == "no terrace for 8"
    assert call(mock, RunContext(), 2) == '{"free": true, "tables": [3, 4]}'


def test_an_error_case_raises_livekits_tool_error_with_its_text() -> None:
    from livekit.agents.llm import ToolError

    mock = tool_mocks.make_mock("book_table", CASES, real_tool)
    with pytest.raises(ToolError, match=r"^fully booked$"):
        call(mock, RunContext(), party_size=8)


def test_a_call_no_case_matches_is_a_tool_error_never_the_real_tool() -> None:
    from livekit.agents.llm import ToolError

    mock = tool_mocks.make_mock("book_table", CASES, real_tool)
    with pytest.raises(ToolError, match=r"no mock of 'book_table' matches .*\"party_size\": 5"):
        call(mock, RunContext(), party_size=5)


@pytest.mark.parametrize(
    ("expected", "actual", "same"),
    [
        (True, 1, False),
        (1, True, False),
        (1, 1.0, True),
        ("8", 8, False),
        ({"a": [1, True]}, {"a": [1, True]}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ([1], [1, 2], False),
        (None, None, True),
    ],
)
def test_when_compares_like_json_not_like_python(expected: Any, actual: Any, same: bool) -> None:
    assert tool_mocks.same(expected, actual) is same


def test_an_unknown_tool_fails_the_sessions_start_naming_the_agents_tools(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from livekit.agents import Agent, function_tool

    class Desk(Agent):
        def __init__(self) -> None:
            super().__init__(instructions="x")

        @function_tool
        async def book_table(self, party_size: int) -> str:
            """Book."""
            return "booked"

    with pytest.raises(tool_mocks.MockToolsError) as raised:
        tool_mocks._enter_mocks(None, Desk(), {"book_tabel": [{"when": None, "output": "x"}]})
    assert "unknown tool 'book_tabel'; the agent's tools: " in str(raised.value)
    assert "book_table" in str(raised.value)
    assert capsys.readouterr().err.startswith(tool_mocks.MARKER + " unknown tool 'book_tabel'")


def test_livekits_executor_runs_the_mock_instead_of_the_tool() -> None:
    """The real path: LiveKit's own mock registry and ``_run_mock`` on a bound tool."""
    from livekit.agents import Agent, AgentSession, function_tool
    from livekit.agents.voice.run_result import _run_mock, _SessionMockTools

    ran: list[str] = []

    class Desk(Agent):
        def __init__(self) -> None:
            super().__init__(instructions="x")

        @function_tool
        async def book_table(self, party_size: int) -> str:
            """Book."""
            ran.append("real")
            return "booked"

    async def scenario() -> Any:
        desk, session = Desk(), AgentSession()
        tool_mocks._enter_mocks(session, desk, {"book_table": CASES})
        mock = _SessionMockTools[session][Desk]["book_table"]
        return await _run_mock(mock, party_size=2)

    assert asyncio.run(scenario()) == '{"free": true, "tables": [3, 4]}' and ran == []


def test_a_case_model_without_error_sends_its_output() -> None:
    assert MockCase(output=None).to_wire() == {"when": None, "output": None}


def test_the_hosts_control_channel_reads_the_mocks_sent_with_the_scenario() -> None:
    import socket

    from lkeval.host import agent_host, control

    ours, theirs = socket.socketpair()
    host_end = control.Control(theirs.detach())
    wire = {"book_table": CASES}
    ours.sendall((json.dumps({"dispatch": "{}", "mock_tools": wire}) + "\n").encode())
    assert host_end.wait_scenario() == "{}"
    assert host_end.mock_tools == wire
    assert agent_host.sibling("tool_mocks") is tool_mocks
    ours.detach()  # closing it would make the host's watcher kill this process
