"""lk-eval's scripted-turn grammar (``turns:`` / ``expect:``), read from YAML nodes.

This grammar is ours, not LiveKit's, and it is strict: an unknown key inside a turn or an
expectation is an error, because a typo such as ``function_call: {nmae: book}`` would otherwise
turn a check into one that always passes. Each expectation maps to one
:class:`~lkeval.scenarios.model.Expectation`, modelled on the assertions of LiveKit's pytest helpers
(``RunResult.expect``).
"""

from __future__ import annotations

import re
from typing import Any, cast

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from lkeval.errors import UsageError
from lkeval.impairments import parse_impairments
from lkeval.scenarios.audio_checks import AUDIO_CHECK_FIELDS, parse_audio_check
from lkeval.scenarios.latency import parse_duration_ms
from lkeval.scenarios.model import (
    CONVERSATION_MODES,
    ConversationMode,
    Expectation,
    ExpectationKind,
    Turn,
)
from lkeval.scenarios.yaml_nodes import (
    FileProblems,
    check_keys,
    describe,
    is_null,
    is_true,
    join,
    line_of,
    mapping_entries,
    read_bool,
    read_positive_int,
    read_str,
    suggestion,
    to_plain,
)

TURN_KEYS = ("user", "expect", "mode", "interrupt_after")
# The fields each event check takes; the keys of this dict are also the expectation kinds
# allowed inside ``contains:``.
EVENT_CHECK_FIELDS: dict[str, tuple[str, ...]] = {
    "message": ("role", "contains", "matches", "intent"),
    "function_call": ("name", "arguments"),
    "function_call_output": ("name", "output", "output_contains", "is_error"),
    "handoff": ("to",),
}
KIND_ALIASES = {"agent_handoff": "handoff"}
EXPECTATION_KEYS = (
    *EVENT_CHECK_FIELDS,
    *KIND_ALIASES,
    "skip",
    "no_more_events",
    "contains",
    *AUDIO_CHECK_FIELDS,
)
MESSAGE_ROLES = ("assistant", "user")


def parse_turns(node: Node | None, path: str, problems: FileProblems) -> tuple[Turn, ...]:
    """``turns:`` → Turns; the first turn alone may omit ``user`` to check the greeting."""
    if node is None or is_null(node):
        return ()
    if not isinstance(node, SequenceNode):
        problems.error(node, path, f"must be a list of turns (- user: ...), got {describe(node)}")
        return ()
    turns = []
    for index, item in enumerate(node.value):
        turn = _parse_turn(item, f"{path}[{index}]", index, problems)
        if turn is not None:
            turns.append(turn)
    return tuple(turns)


def _parse_turn(node: Node, path: str, index: int, problems: FileProblems) -> Turn | None:
    if not isinstance(node, MappingNode):
        problems.error(
            node, path, f"a turn must be a mapping with 'user:' and 'expect:', got {describe(node)}"
        )
        return None
    entries = mapping_entries(node, path, problems)
    check_keys(entries, TURN_KEYS, path, problems, strict=True)
    expect_node = entries["expect"][1] if "expect" in entries else None
    expect = _parse_expect_list(expect_node, f"{path}.expect", problems)
    if "user" not in entries:
        if index > 0:
            problems.error(
                node,
                f"{path}.user",
                "missing required field (only the first turn may omit it, to check the greeting)",
            )
            return None
        if not expect:
            problems.warning(node, path, "a greeting turn without 'expect:' checks nothing")
        return Turn(user=None, expect=expect, line=line_of(node))
    user = read_str(entries["user"][1], f"{path}.user", problems, non_empty=True)
    if user is None:
        return None
    mode = read_mode(entries.get("mode"), f"{path}.mode", problems)
    interrupt_after = _read_interrupt_after(entries, path, mode, index, problems)
    return Turn(
        user=user,
        expect=expect,
        line=line_of(node),
        mode=mode,
        interrupt_after=interrupt_after,
    )


def parse_scenario_mode(
    entries: dict[str, tuple[Node, Node]],
    turns: tuple[Turn, ...],
    path: str,
    problems: FileProblems,
) -> ConversationMode | None:
    """``mode: text|audio``; a scenario held to text cannot have a spoken turn."""
    mode = read_mode(entries.get("mode"), f"{path}.mode", problems)
    if mode == "text":
        for index, turn in enumerate(turns):
            if turn.mode == "audio" or turn.interrupt_after is not None:
                problems.error(
                    entries["mode"][1],
                    f"{path}.mode",
                    f"is text, but turns[{index}] (line {turn.line}) is spoken",
                )
                break
    return mode


def read_caller_interrupt(
    entries: dict[str, tuple[Node, Node]],
    path: str,
    plays_caller: bool,
    mode: ConversationMode | None,
    problems: FileProblems,
) -> float | None:
    """``caller_interrupt_after: 1.5s``: the simulated caller's every line after its first
    starts that long into the agent's reply (seconds); it needs a simulated caller who speaks."""
    entry = entries.get("caller_interrupt_after")
    seconds = _read_seconds(entry, path, problems)
    if entry is None or seconds is None:
        return None
    if mode == "text":
        problems.error(entry[1], path, "the scenario is text: the caller must speak to interrupt")
        return None
    if not plays_caller:
        problems.error(entry[1], path, "no simulated caller (scripted turns without then_simulate)")
        return None
    return seconds


def _read_seconds(
    entry: tuple[Node, Node] | None, where: str, problems: FileProblems
) -> float | None:
    """A duration with its unit (``1.5s``, ``1500ms``) in seconds, or None when absent or
    after reporting it."""
    if entry is None or is_null(entry[1]):
        return None
    try:
        ms = parse_duration_ms(entry[1].value if isinstance(entry[1], ScalarNode) else None)
    except ValueError as exc:
        problems.error(entry[1], where, str(exc))
        return None
    return ms / 1000


def read_impair(entry: tuple[Node, Node] | None, path: str, problems: FileProblems) -> str | None:
    """A scenario's ``impair:`` (``--impair``'s grammar), or None when absent or after
    reporting the bad field at its line."""
    if entry is None or is_null(entry[1]):
        return None
    value = read_str(entry[1], path, problems)
    if value is None:
        return None
    try:
        parse_impairments(value, where=path)
    except UsageError as exc:
        problems.error(entry[1], path, str(exc).removeprefix(f"{path}: "))
        return None
    return value


def read_mode(
    entry: tuple[Node, Node] | None, path: str, problems: FileProblems
) -> ConversationMode | None:
    """A ``mode:`` value (``text`` or ``audio``), or None when absent or after reporting."""
    if entry is None or is_null(entry[1]):
        return None
    value = read_str(entry[1], path, problems)
    if value is None:
        return None
    if value not in CONVERSATION_MODES:
        problems.error(
            entry[1], path, f"must be one of {', '.join(CONVERSATION_MODES)}, got {value!r}"
        )
        return None
    return value  # checked just above


def _read_interrupt_after(
    entries: dict[str, tuple[Node, Node]],
    path: str,
    mode: ConversationMode | None,
    index: int,
    problems: FileProblems,
) -> float | None:
    """``interrupt_after: 1.5s``: seconds into the agent's previous reply (a duration with its
    unit); a barge-in needs a spoken turn and a reply before it to cut into."""
    entry = entries.get("interrupt_after")
    where = f"{path}.interrupt_after"
    seconds = _read_seconds(entry, where, problems)
    if entry is None or seconds is None:
        return None
    if mode == "text":
        problems.error(entry[1], where, "a text turn cannot interrupt: the caller must speak")
        return None
    if index == 0:
        problems.error(entry[1], where, "the first turn has no reply of the agent to interrupt")
        return None
    return seconds


def _parse_expect_list(
    node: Node | None, path: str, problems: FileProblems
) -> tuple[Expectation, ...]:
    if node is None or is_null(node):
        return ()
    if not isinstance(node, SequenceNode):
        problems.error(
            node, path, f"must be a list of expectations (- message: ...), got {describe(node)}"
        )
        return ()
    found = []
    for index, item in enumerate(node.value):
        expectation = _parse_expectation(item, f"{path}[{index}]", problems)
        if expectation is not None:
            found.append(expectation)
    return tuple(found)


def _parse_expectation(node: Node, path: str, problems: FileProblems) -> Expectation | None:
    kinds = ", ".join(EXPECTATION_KEYS)
    if not isinstance(node, MappingNode):
        problems.error(node, path, f"an expectation must be a mapping with one key of: {kinds}")
        return None
    entries = mapping_entries(node, path, problems)
    if len(entries) != 1:
        problems.error(node, path, _one_key_message(entries, EXPECTATION_KEYS))
        return None
    key, (key_node, value) = next(iter(entries.items()))
    return _parse_kind(
        key, key_node, value, join(path, key), line_of(node), problems, anywhere=False
    )


def _one_key_message(entries: dict[str, tuple[Node, Node]], allowed: tuple[str, ...]) -> str:
    """Why a mapping that must hold exactly one key does not; spots the mis-indented field."""
    if not entries:
        return f"empty expectation; use one key of: {', '.join(allowed)}"
    keys = list(entries)
    message = f"an expectation takes exactly one key, found {len(keys)}: {', '.join(keys)}"
    kinds = [k for k in keys if k in allowed]
    if len(kinds) == 1:
        fields = EVENT_CHECK_FIELDS.get(KIND_ALIASES.get(kinds[0], kinds[0]), ())
        strays = [k for k in keys if k in fields]
        if strays:
            message += f" (indent {', '.join(strays)} under '{kinds[0]}')"
    return message


def _parse_kind(
    key: str,
    key_node: Node,
    value: Node,
    path: str,
    line: int,
    problems: FileProblems,
    *,
    anywhere: bool,
) -> Expectation | None:
    kind = KIND_ALIASES.get(key, key)
    if kind in EVENT_CHECK_FIELDS:
        return _parse_event_check(kind, value, path, line, problems, anywhere=anywhere)
    if kind not in EXPECTATION_KEYS:
        allowed = EXPECTATION_KEYS if not anywhere else (*EVENT_CHECK_FIELDS, *KIND_ALIASES)
        problems.error(
            key_node,
            path,
            f"unknown expectation '{key}'{suggestion(key, allowed)}; "
            f"use one of: {', '.join(allowed)}",
        )
        return None
    if anywhere:
        problems.error(key_node, path, f"'{key}' cannot be used inside 'contains'")
        return None
    if kind in AUDIO_CHECK_FIELDS:
        return parse_audio_check(kind, value, path, line, problems, _read_contains_texts)
    if kind == "skip":
        if is_null(value) or is_true(value):
            return Expectation(kind="skip", line=line, count=1)
        count = read_positive_int(value, path, problems)
        return None if count is None else Expectation(kind="skip", line=line, count=count)
    if kind == "no_more_events":
        if is_null(value) or is_true(value):
            return Expectation(kind="no_more_events", line=line)
        problems.error(
            value, path, f"must be true, got {describe(value)}; remove the item to allow more"
        )
        return None
    return _parse_contains(value, path, line, problems)


def _parse_contains(node: Node, path: str, line: int, problems: FileProblems) -> Expectation | None:
    """``contains: {function_call: {...}}``: the same check, anywhere in the turn's events."""
    allowed = (*EVENT_CHECK_FIELDS, *KIND_ALIASES)
    if not isinstance(node, MappingNode):
        problems.error(node, path, f"must be a mapping with one key of: {', '.join(allowed)}")
        return None
    entries = mapping_entries(node, path, problems)
    if len(entries) != 1:
        problems.error(node, path, _one_key_message(entries, allowed))
        return None
    key, (key_node, value) = next(iter(entries.items()))
    return _parse_kind(key, key_node, value, join(path, key), line, problems, anywhere=True)


def _parse_event_check(
    kind: str, node: Node, path: str, line: int, problems: FileProblems, *, anywhere: bool
) -> Expectation | None:
    fields: dict[str, Any] = {}
    if is_null(node):
        return Expectation(kind=cast(ExpectationKind, kind), line=line, anywhere=anywhere)
    if not isinstance(node, MappingNode):
        allowed = ", ".join(EVENT_CHECK_FIELDS[kind])
        problems.error(
            node, path, f"must be a mapping of {allowed} (or empty), got {describe(node)}"
        )
        return None
    entries = mapping_entries(node, path, problems)
    check_keys(entries, EVENT_CHECK_FIELDS[kind], path, problems, strict=True)
    for key, (_, value) in entries.items():
        if key not in EVENT_CHECK_FIELDS[kind]:
            continue
        field_path = join(path, key)
        if key == "contains":
            fields["contains"] = _read_contains_texts(value, field_path, problems)
        elif key == "arguments":
            if isinstance(value, MappingNode):
                fields["arguments"] = to_plain(value, field_path, problems)
            else:
                problems.error(
                    value,
                    field_path,
                    f"must be a mapping of argument names to values, got {describe(value)}",
                )
        elif key == "is_error":
            fields["is_error"] = read_bool(value, field_path, problems)
        else:
            fields[key] = read_str(value, field_path, problems, non_empty=key != "output")
    role = fields.get("role")
    if role is not None and role not in MESSAGE_ROLES:
        problems.error(
            entries["role"][1], join(path, "role"), f"must be one of: {', '.join(MESSAGE_ROLES)}"
        )
        fields["role"] = None
    pattern = fields.get("matches")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            problems.error(
                entries["matches"][1], join(path, "matches"), f"invalid regular expression: {exc}"
            )
    return Expectation(
        kind=cast(ExpectationKind, kind),
        line=line,
        anywhere=anywhere,
        **{k: v for k, v in fields.items() if v is not None},
    )


def _read_contains_texts(node: Node, path: str, problems: FileProblems) -> tuple[str, ...]:
    items = node.value if isinstance(node, SequenceNode) else [node]
    texts = []
    for index, item in enumerate(items):
        item_path = f"{path}[{index}]" if isinstance(node, SequenceNode) else path
        text = read_str(item, item_path, problems, non_empty=True)
        if text is not None:
            texts.append(text)
    return tuple(texts)
