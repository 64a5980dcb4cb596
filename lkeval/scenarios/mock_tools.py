"""A scenario's ``mock_tools:``, read from YAML nodes: tools that answer from the scenario.

lk-eval's grammar, strict like ``turns:`` (a typo would run the real tool, which is what the
mock was written to keep out of CI)::

    mock_tools:
      lookup_order: "Order 42 shipped on Monday."     # any call: this output
      cancel_order: {error: "the order system is down"}
      check_table:                                    # first case whose `when` matches
        - when: {party_size: 8}
          output: {free: false}
        - output: {free: true}

An output is any JSON value (a string reaches the LLM as written, anything else as JSON); an
error is the text the LLM sees as the tool's error. The agent process applies them
(``lkeval/host/tool_mocks.py``), where a name that is not one of the agent's tools is an
error naming the tools it has: only the agent knows its tools, so that check cannot be made
here.
"""

from __future__ import annotations

import re
from typing import Any

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from lkeval.scenarios.model import MockCase, ToolMock
from lkeval.scenarios.yaml_nodes import (
    FileProblems,
    check_keys,
    describe,
    is_null,
    line_of,
    mapping_entries,
    read_str,
    to_plain,
)

CASE_KEYS = ("when", "output", "error")
# The names LLM APIs accept for a function (OpenAI: ^[a-zA-Z0-9_-]{1,64}$).
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_EXAMPLE = 'e.g. lookup_order: "Order 42 shipped" or lookup_order: {error: "down"}'


def parse_mock_tools(node: Node | None, path: str, problems: FileProblems) -> tuple[ToolMock, ...]:
    """``mock_tools:`` -> one :class:`ToolMock` per tool, each mistake reported at its line."""
    if node is None or is_null(node):
        return ()
    if not isinstance(node, MappingNode):
        problems.error(
            node,
            path,
            f"must be a mapping of tool names to outputs ({_EXAMPLE}), got {describe(node)}",
        )
        return ()
    mocks = []
    for name, (key_node, value) in mapping_entries(node, path, problems).items():
        tool_path = f"{path}.{name}"
        if not _TOOL_NAME.match(name):
            problems.error(
                key_node, tool_path, "not a tool name (letters, digits, _ and -, at most 64)"
            )
            continue
        cases = _parse_cases(value, tool_path, problems)
        if cases:
            mocks.append(ToolMock(name=name, cases=cases, line=line_of(key_node)))
    return tuple(mocks)


def _parse_cases(node: Node, path: str, problems: FileProblems) -> tuple[MockCase, ...]:
    if is_null(node):
        problems.error(node, path, f"needs an output or an error ({_EXAMPLE})")
        return ()
    if isinstance(node, ScalarNode):
        return (MockCase(output=to_plain(node, path, problems)),)
    if isinstance(node, MappingNode):
        case = _parse_case(node, path, problems)
        return (case,) if case is not None else ()
    assert isinstance(node, SequenceNode)
    if not node.value:
        problems.error(node, path, f"needs at least one case ({_EXAMPLE})")
        return ()
    cases: list[MockCase] = []
    for index, item in enumerate(node.value):
        item_path = f"{path}[{index}]"
        if not isinstance(item, MappingNode):
            problems.error(
                item,
                item_path,
                f"a case must be a mapping with output: or error:, got {describe(item)}",
            )
            continue
        case = _parse_case(item, item_path, problems)
        if case is None:
            continue
        if case.when is None and index < len(node.value) - 1:
            problems.error(
                item,
                item_path,
                "a case without 'when:' answers every call, so the cases "
                "after it never would; put it last",
            )
        cases.append(case)
    return tuple(cases)


def _parse_case(node: MappingNode, path: str, problems: FileProblems) -> MockCase | None:
    entries = mapping_entries(node, path, problems)
    before = len(problems.diagnostics)
    check_keys(entries, CASE_KEYS, path, problems, strict=True)
    if len(problems.diagnostics) > before and not {"output", "error"} & set(entries):
        problems.error(node, path, "to return a mapping, write it under 'output:'")
        return None
    if ("output" in entries) == ("error" in entries):
        problems.error(node, path, "needs exactly one of 'output:' and 'error:'")
        return None
    when = _parse_when(entries.get("when"), f"{path}.when", problems)
    if "error" in entries:
        error = read_str(entries["error"][1], f"{path}.error", problems, non_empty=True)
        return MockCase(when=when, error=error) if error is not None else None
    output: Any = to_plain(entries["output"][1], f"{path}.output", problems)
    return MockCase(when=when, output=output)


def _parse_when(
    entry: tuple[Node, Node] | None, path: str, problems: FileProblems
) -> dict[str, Any] | None:
    """``when:`` names arguments and the values a call must have (JSON equality)."""
    if entry is None:
        return None
    node = entry[1]
    if not isinstance(node, MappingNode) or not node.value:
        problems.error(
            node,
            path,
            f"must be a mapping of argument names to values, e.g. {{party_size: 8}}, "
            f"got {describe(node)}",
        )
        return None
    when: dict[str, Any] = to_plain(node, path, problems)
    return when
