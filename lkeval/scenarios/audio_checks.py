"""The audio expectations of a scripted turn (docs/audio.md), read from YAML nodes.

``heard:`` checks what the agent's STT heard of the caller's line (the turn's user message in
audio mode): ``contains`` (case-insensitive), ``matches`` (a regular expression) and
``max_wer`` (the word error rate against what the caller said). A spoken booking number that
reached the agent mangled fails here, whatever the agent answered.

``barge_in:`` checks a line that cut into the agent's reply (``interrupt_after``):
``stopped_within: 1s`` (the agent stopped speaking within the bound of the caller starting)
or ``yields: false`` (a back-channel: the agent must not stop; if it does, that is a false
yield). Like ``contains:``, neither moves the cursor of the turn's in-order checks.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from yaml.nodes import MappingNode, Node, ScalarNode

from lkeval.scenarios.latency import parse_duration_ms
from lkeval.scenarios.model import Expectation
from lkeval.scenarios.yaml_nodes import (
    FileProblems,
    check_keys,
    describe,
    join,
    mapping_entries,
    read_bool,
    read_str,
)

#: Reads ``contains:`` (a text or a list of texts), as the message check does.
ReadTexts = Callable[[Node, str, FileProblems], tuple[str, ...]]

AUDIO_CHECK_FIELDS = {
    "heard": ("contains", "matches", "max_wer"),
    "barge_in": ("stopped_within", "yields"),
}


def parse_audio_check(
    kind: str, node: Node, path: str, line: int, problems: FileProblems, contains: ReadTexts
) -> Expectation | None:
    """``heard: {...}`` or ``barge_in: {...}``; ``contains`` reads a text or a list of texts."""
    allowed = AUDIO_CHECK_FIELDS[kind]
    if not isinstance(node, MappingNode):
        problems.error(
            node, path, f"must be a mapping of {', '.join(allowed)}, got {describe(node)}"
        )
        return None
    entries = mapping_entries(node, path, problems)
    check_keys(entries, allowed, path, problems, strict=True)
    if not entries:
        problems.error(node, path, f"checks nothing: give one of {', '.join(allowed)}")
        return None
    if kind == "heard":
        return _heard(entries, path, line, problems, contains)
    return _barge_in(entries, path, line, problems)


def _heard(
    entries: dict[str, tuple[Node, Node]],
    path: str,
    line: int,
    problems: FileProblems,
    contains: ReadTexts,
) -> Expectation | None:
    texts: tuple[str, ...] = ()
    if "contains" in entries:
        texts = contains(entries["contains"][1], join(path, "contains"), problems)
    pattern = None
    if "matches" in entries:
        pattern = read_str(entries["matches"][1], join(path, "matches"), problems, non_empty=True)
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                problems.error(
                    entries["matches"][1],
                    join(path, "matches"),
                    f"invalid regular expression: {exc}",
                )
                pattern = None
    max_wer = None
    if "max_wer" in entries:
        node = entries["max_wer"][1]
        try:
            max_wer = float(node.value) if isinstance(node, ScalarNode) else -1.0
        except ValueError:
            max_wer = -1.0
        if not 0 <= max_wer <= 1:
            problems.error(
                node, join(path, "max_wer"), f"must be a number from 0 to 1, got {describe(node)}"
            )
            return None
    return Expectation(
        kind="heard", line=line, anywhere=True, contains=texts, matches=pattern, max_wer=max_wer
    )


def _barge_in(
    entries: dict[str, tuple[Node, Node]], path: str, line: int, problems: FileProblems
) -> Expectation | None:
    within = yields = None
    if "stopped_within" in entries:
        node = entries["stopped_within"][1]
        try:
            within = parse_duration_ms(node.value if isinstance(node, ScalarNode) else None)
        except ValueError as exc:
            problems.error(node, join(path, "stopped_within"), str(exc))
            return None
    if "yields" in entries:
        yields = read_bool(entries["yields"][1], join(path, "yields"), problems)
        if yields is None:
            return None
    if within is not None and yields is False:
        problems.error(entries["yields"][1], join(path, "yields"), "contradicts stopped_within")
        return None
    return Expectation(kind="barge_in", line=line, anywhere=True, within_ms=within, yields=yields)
