"""Latency budgets as users write them: ``p95=1.5s`` on the command line, ``{p95: 1200ms}`` in YAML.

A budget names a statistic of the turn latency (``p50``, ``p95``, ``max``) or of the agent's
time to first token (``ttft_p50``, ``ttft_p95``, ``ttft_max``) and a duration with its unit;
a bare number is refused, because "1.5" could be seconds or milliseconds and a budget read
the wrong way passes everything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from yaml.nodes import MappingNode, Node, ScalarNode

from lkeval.scenarios.yaml_nodes import FileProblems, describe, is_null, mapping_entries

LATENCY_KEYS = (
    "p50",
    "p95",
    "max",
    "ttft_p50",
    "ttft_p95",
    "ttft_max",
    "first_audio_p50",
    "first_audio_p95",
    "first_audio_max",
)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s)\s*$")


def parse_duration_ms(text: object) -> float:
    """``"1200ms"`` / ``"1.2s"`` -> milliseconds; ValueError names what is expected."""
    match = _DURATION.match(str(text)) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{text!r} is not a duration with its unit (e.g. 1200ms or 1.2s)")
    value = float(match.group(1))
    return value if match.group(2) == "ms" else value * 1000


def parse_latency_budget(values: Mapping[str, object]) -> dict[str, float]:
    """``{"p95": "1200ms"}`` -> ``{"p95": 1200.0}``; ValueError names the bad key or value."""
    budget: dict[str, float] = {}
    for key, value in values.items():
        key = key.replace(".", "_")  # first_audio.p95 is written as the issue spells it
        if key not in LATENCY_KEYS:
            raise ValueError(
                f"unknown latency statistic {key!r} (one of {', '.join(LATENCY_KEYS)})"
            )
        try:
            budget[key] = parse_duration_ms(value)
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    return budget


def parse_latency_flag(text: str) -> dict[str, float]:
    """``--max-latency p95=1.5s[,ttft_p95=600ms]`` -> a budget in milliseconds."""
    pairs: dict[str, object] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"{part.strip()!r} is not STAT=DURATION (e.g. p95=1.5s)")
        pairs[key.strip()] = value.strip()
    return parse_latency_budget(pairs)


def read_latency_node(node: Node | None, path: str, problems: FileProblems) -> dict[str, float]:
    """A scenario's ``latency:`` mapping, each mistake reported at its line."""
    if node is None or is_null(node):
        return {}
    if not isinstance(node, MappingNode):
        problems.error(node, path, f"must be a mapping like {{p95: 1200ms}}, got {describe(node)}")
        return {}
    budget: dict[str, float] = {}
    for key, (key_node, value_node) in mapping_entries(node, path, problems).items():
        key = key.replace(".", "_")
        if key not in LATENCY_KEYS:
            known = ", ".join(LATENCY_KEYS)
            problems.error(key_node, f"{path}.{key}", f"unknown latency statistic (one of {known})")
            continue
        try:
            raw = value_node.value if isinstance(value_node, ScalarNode) else describe(value_node)
            budget[key] = parse_duration_ms(raw)
        except ValueError as exc:
            problems.error(value_node, f"{path}.{key}", str(exc))
    return budget
