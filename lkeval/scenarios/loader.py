"""Load and validate LiveKit ``scenarios.yaml`` files into :mod:`lkeval.scenarios.model` objects.

Scenario files are the input users get wrong most often, so nothing here raises on bad input:
every problem of a file becomes a :class:`Diagnostic` naming file, line, column and field
(``scenarios[3].turns[0].expect[1].function_call.name``), and all of them are returned at
once so a user fixes a file in one round trip. The YAML is parsed with ``yaml.compose`` rather
than ``yaml.safe_load`` because only the node tree keeps the line of every value.

LiveKit's keys load exactly as ``lk agent simulate`` reads them, and unknown keys next to them
are warnings (``lk`` ignores them too). lk-eval's own grammar under ``turns:`` is strict; see
:mod:`lkeval.scenarios.turns`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from lkeval.errors import InputFileError
from lkeval.scenarios.bounds import MAX_REPEAT, MAX_TIMEOUT_SECONDS, MAX_TURNS
from lkeval.scenarios.latency import read_latency_node
from lkeval.scenarios.mock_tools import parse_mock_tools
from lkeval.scenarios.model import BUILTIN_JUDGES, Limits, Scenario, ScenarioGroup, derive_id
from lkeval.scenarios.summary import summarize
from lkeval.scenarios.turns import (
    parse_scenario_mode,
    parse_turns,
    read_caller_interrupt,
    read_impair,
)
from lkeval.scenarios.yaml_nodes import (
    STR_TAG,
    Diagnostic,
    FileProblems,
    Severity,
    check_keys,
    describe,
    is_null,
    line_of,
    mapping_entries,
    read_bool,
    read_document,
    read_positive_int,
    read_positive_number,
    read_str,
    suggestion,
    to_plain,
)
from lkeval.text.file_names import file_stem

__all__ = [
    "GROUP_KEYS",
    "JUDGE_NAMES",
    "SCENARIO_KEYS",
    "SCHEMA_PATH",
    "Diagnostic",
    "ScenarioFileError",
    "Severity",
    "load_or_raise",
    "load_scenario_file",
    "load_scenario_files",
    "summarize",
]

StrPath = str | PathLike[str]

SCHEMA_PATH = Path(__file__).parent / "schema" / "scenarios.schema.json"
GROUP_KEYS = ("id", "name", "scenarios")
LIVEKIT_SCENARIO_KEYS = ("id", "label", "instructions", "agent_expectations", "tags", "userdata")
LKEVAL_SCENARIO_KEYS = (
    "turns",
    "boot_timeout",
    "turn_timeout",
    "max_turns",
    "repeat",
    "min_pass",
    "judges",
    "then_simulate",
    "latency",
    "mock_tools",
    "mode",
    "impair",
    "caller_interrupt_after",
)
SCENARIO_KEYS = LIVEKIT_SCENARIO_KEYS + LKEVAL_SCENARIO_KEYS
# The built-in judges of livekit.agents.evals, the vocabulary users already know.
JUDGE_NAMES = BUILTIN_JUDGES


class ScenarioFileError(InputFileError):
    """Scenario files with at least one error; holds every diagnostic (warnings too)."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = list(diagnostics)
        errors = sum(1 for d in self.diagnostics if d.is_error)
        lines = [f"{errors} error(s) in scenario files:", *(str(d) for d in self.diagnostics)]
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class _IdSite:
    """Where a scenario's id comes from, for duplicate reports that name both places."""

    scenario_id: str
    derived: bool
    file: str
    node: Node
    field: str


def load_scenario_file(path: StrPath) -> tuple[ScenarioGroup, list[Diagnostic]]:
    """Load one file: the scenarios that could be built, and every problem found.

    Any diagnostic with severity "error" means the file must not be run.
    """
    group, diagnostics, sites = _load(path)
    diagnostics += _duplicate_ids(sites, {}) + _shared_files(sites, {})
    return group, _sorted(diagnostics)


def load_scenario_files(paths: Iterable[StrPath]) -> tuple[list[ScenarioGroup], list[Diagnostic]]:
    """Load several files; scenario ids must be unique across all of them (results key on them)."""
    groups: list[ScenarioGroup] = []
    diagnostics: list[Diagnostic] = []
    seen_files: dict[Path, str] = {}
    seen_ids: dict[str, _IdSite] = {}
    seen_stems: dict[str, _IdSite] = {}
    for path in paths:
        resolved = Path(path).resolve()
        if resolved in seen_files:
            diagnostics.append(
                Diagnostic(
                    str(path),
                    None,
                    None,
                    "",
                    f"same file as {seen_files[resolved]}; loaded once",
                    "warning",
                )
            )
            continue
        seen_files[resolved] = str(path)
        group, file_diagnostics, sites = _load(path)
        groups.append(group)
        clashes = _duplicate_ids(sites, seen_ids) + _shared_files(sites, seen_stems)
        diagnostics += _sorted(file_diagnostics + clashes)
    return groups, diagnostics


def load_or_raise(paths: Iterable[StrPath]) -> tuple[list[ScenarioGroup], list[Diagnostic]]:
    """Load files for a run: the groups and the warnings, or :class:`ScenarioFileError`."""
    groups, diagnostics = load_scenario_files(paths)
    if any(d.is_error for d in diagnostics):
        raise ScenarioFileError(diagnostics)
    return groups, diagnostics


def _sorted(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(diagnostics, key=lambda d: (d.line or 0, d.column or 0))


def _load(path: StrPath) -> tuple[ScenarioGroup, list[Diagnostic], list[_IdSite]]:
    file = str(path)
    problems = FileProblems(file)
    empty = ScenarioGroup(file=file, id="", name=Path(path).stem, scenarios=())
    root = read_document(Path(path), problems)
    if root is None:
        return empty, problems.diagnostics, []
    if not isinstance(root, MappingNode):
        hint = ""
        if isinstance(root, SequenceNode):
            hint = "; put the list under 'scenarios:'"
        problems.error(
            root,
            "",
            f"the file must be a mapping with a 'scenarios:' list, got {describe(root)}{hint}",
        )
        return empty, problems.diagnostics, []
    group, sites = _parse_group(root, file, problems)
    return group, problems.diagnostics, sites


def _parse_group(
    root: MappingNode, file: str, problems: FileProblems
) -> tuple[ScenarioGroup, list[_IdSite]]:
    entries = mapping_entries(root, "", problems)
    check_keys(entries, GROUP_KEYS, "", problems, strict=False)
    group_id = _optional_str(entries, "id", "id", problems) or ""
    name = _optional_str(entries, "name", "name", problems) or Path(file).stem
    scenarios: list[Scenario] = []
    sites: list[_IdSite] = []
    if "scenarios" not in entries:
        problems.error(root, "scenarios", "missing required field (a list of scenarios)")
    else:
        node = entries["scenarios"][1]
        if is_null(node) or (isinstance(node, SequenceNode) and not node.value):
            problems.warning(node, "scenarios", "no scenarios in this file")
        elif not isinstance(node, SequenceNode):
            problems.error(node, "scenarios", f"must be a list of scenarios, got {describe(node)}")
        else:
            for index, item in enumerate(node.value):
                built = _parse_scenario(item, f"scenarios[{index}]", file, group_id, name, problems)
                if built is not None:
                    scenarios.append(built[0])
                    sites.append(built[1])
    group = ScenarioGroup(file=file, id=group_id, name=name, scenarios=tuple(scenarios))
    return group, sites


def _optional_str(
    entries: dict[str, tuple[Node, Node]], key: str, path: str, problems: FileProblems
) -> str | None:
    if key not in entries or is_null(entries[key][1]):
        return None
    return read_str(entries[key][1], path, problems, non_empty=key in ("id", "name"))


def _parse_scenario(
    node: Node, path: str, file: str, group_id: str, group_name: str, problems: FileProblems
) -> tuple[Scenario, _IdSite] | None:
    if not isinstance(node, MappingNode):
        problems.error(
            node, path, f"a scenario must be a mapping with 'label:', got {describe(node)}"
        )
        return None
    entries = mapping_entries(node, path, problems)
    check_keys(entries, SCENARIO_KEYS, path, problems, strict=False)
    label = _read_label(node, entries, path, problems)
    explicit_id = _optional_str(entries, "id", f"{path}.id", problems)
    instructions = _optional_str(entries, "instructions", f"{path}.instructions", problems) or ""
    expectations = _optional_str(
        entries, "agent_expectations", f"{path}.agent_expectations", problems
    )
    tags = _parse_tags(entries.get("tags"), f"{path}.tags", problems)
    userdata = _parse_userdata(entries.get("userdata"), f"{path}.userdata", problems)
    turns = parse_turns(_value(entries, "turns"), f"{path}.turns", problems)
    if not turns and not instructions.strip():
        problems.warning(
            node, path, "neither 'turns' nor 'instructions': the simulated user has no script"
        )
    limits, repeat, min_pass = _parse_run_settings(entries, path, problems)
    judges = _parse_judges(_value(entries, "judges"), f"{path}.judges", problems)
    then_simulate = _parse_then_simulate(node, entries, instructions, path, problems)
    if label is None:
        return None
    scenario_id = explicit_id or derive_id(group_name, label)
    mode = parse_scenario_mode(entries, turns, path, problems)
    scenario = Scenario(
        label=label,
        instructions=instructions,
        agent_expectations=expectations or "",
        file=file,
        line=line_of(node),
        group_id=group_id,
        group_name=group_name,
        id=scenario_id,
        id_derived=explicit_id is None,
        tags=tags,
        userdata=userdata,
        turns=turns,
        limits=limits,
        repeat=repeat,
        min_pass=min_pass,
        judges=judges,
        then_simulate=then_simulate,
        latency=read_latency_node(_value(entries, "latency"), f"{path}.latency", problems),
        mock_tools=parse_mock_tools(_value(entries, "mock_tools"), f"{path}.mock_tools", problems),
        mode=mode,
        impair=read_impair(entries.get("impair"), f"{path}.impair", problems),
        caller_interrupt_after=read_caller_interrupt(
            entries, f"{path}.caller_interrupt_after", not turns or then_simulate, mode, problems
        ),
    )
    key = "label" if explicit_id is None else "id"  # where a duplicate id is pointed at
    return scenario, _IdSite(
        scenario_id, explicit_id is None, file, entries[key][1], f"{path}.{key}"
    )


def _read_label(
    node: Node, entries: dict[str, tuple[Node, Node]], path: str, problems: FileProblems
) -> str | None:
    """The scenario's required ``label`` (None, with the problem said, when it has none)."""
    if "label" not in entries or is_null(entries["label"][1]):
        problems.error(node, f"{path}.label", "missing required field")
        return None
    return read_str(entries["label"][1], f"{path}.label", problems, non_empty=True)


def _parse_run_settings(
    entries: dict[str, tuple[Node, Node]], path: str, problems: FileProblems
) -> tuple[Limits, int | None, int | None]:
    """The scenario's limits, ``repeat`` and ``min_pass`` (which may not exceed ``repeat``)."""
    limits = Limits(
        boot_timeout=_number(entries, "boot_timeout", path, problems),
        turn_timeout=_number(entries, "turn_timeout", path, problems),
        max_turns=_count(entries, "max_turns", path, problems, MAX_TURNS),
    )
    repeat = _count(entries, "repeat", path, problems, MAX_REPEAT)
    min_pass = _count(entries, "min_pass", path, problems, MAX_REPEAT)
    if repeat is not None and min_pass is not None and min_pass > repeat:
        problems.error(
            entries["min_pass"][1], f"{path}.min_pass", f"must not exceed repeat ({repeat})"
        )
    return limits, repeat, min_pass


def _parse_then_simulate(
    node: Node,
    entries: dict[str, tuple[Node, Node]],
    instructions: str,
    path: str,
    problems: FileProblems,
) -> bool:
    """``then_simulate: true`` needs instructions for the simulated user to carry on from."""
    then_node = _value(entries, "then_simulate")
    then_simulate = bool(then_node and read_bool(then_node, f"{path}.then_simulate", problems))
    if then_simulate and not instructions.strip():
        problems.error(
            then_node or node,
            f"{path}.then_simulate",
            "needs 'instructions' for the simulated user to carry on from",
        )
    return then_simulate


def _value(entries: dict[str, tuple[Node, Node]], key: str) -> Node | None:
    return entries[key][1] if key in entries else None


def _number(
    entries: dict[str, tuple[Node, Node]], key: str, path: str, problems: FileProblems
) -> float | None:
    node = _value(entries, key)
    if node is None or is_null(node):
        return None
    return read_positive_number(node, f"{path}.{key}", problems, MAX_TIMEOUT_SECONDS)


def _count(
    entries: dict[str, tuple[Node, Node]],
    key: str,
    path: str,
    problems: FileProblems,
    maximum: int,
) -> int | None:
    node = _value(entries, key)
    if node is None or is_null(node):
        return None
    return read_positive_int(node, f"{path}.{key}", problems, maximum)


def _parse_tags(
    entry: tuple[Node, Node] | None, path: str, problems: FileProblems
) -> dict[str, str]:
    """Tags are string → string in LiveKit's proto; plain numbers and booleans are converted."""
    if entry is None or is_null(entry[1]):
        return {}
    node = entry[1]
    if not isinstance(node, MappingNode):
        problems.error(node, path, f"must be a mapping of names to strings, got {describe(node)}")
        return {}
    tags: dict[str, str] = {}
    for key, (_, value) in mapping_entries(node, path, problems).items():
        tag_path = f"{path}.{key}"
        if not isinstance(value, ScalarNode):
            problems.error(value, tag_path, f"must be a string, got {describe(value)}")
        elif is_null(value):
            problems.warning(value, tag_path, "has no value; using an empty string")
            tags[key] = ""
        else:
            if value.tag != STR_TAG:
                problems.warning(
                    value,
                    tag_path,
                    f"LiveKit tags are strings; read {describe(value)} as '{value.value}'"
                    " (quote it)",
                )
            tags[key] = str(value.value)
    return tags


def _parse_userdata(
    entry: tuple[Node, Node] | None, path: str, problems: FileProblems
) -> dict[str, Any] | None:
    """userdata reaches the agent as JSON, so it must be a mapping of JSON-able values."""
    if entry is None or is_null(entry[1]):
        return None
    node = entry[1]
    if not isinstance(node, MappingNode):
        problems.error(node, path, f"must be a mapping, got {describe(node)}")
        return None
    data: dict[str, Any] = to_plain(node, path, problems)
    return data


def _parse_judges(node: Node | None, path: str, problems: FileProblems) -> tuple[str, ...]:
    if node is None or is_null(node):
        return ()
    if not isinstance(node, SequenceNode):
        problems.error(
            node, path, f"must be a list of judge names, e.g. [accuracy], got {describe(node)}"
        )
        return ()
    judges: list[str] = []
    for index, item in enumerate(node.value):
        name = read_str(item, f"{path}[{index}]", problems, non_empty=True)
        if name is None:
            continue
        if name not in JUDGE_NAMES:
            problems.error(
                item,
                f"{path}[{index}]",
                f"unknown judge '{name}'{suggestion(name, JUDGE_NAMES)}; "
                f"known: {', '.join(JUDGE_NAMES)}",
            )
        elif name in judges:
            problems.warning(item, f"{path}[{index}]", f"judge '{name}' listed twice")
        else:
            judges.append(name)
    return tuple(judges)


def _shared_files(sites: list[_IdSite], seen: dict[str, _IdSite]) -> list[Diagnostic]:
    """Two scenario ids must not name the same files: an attempt's log and cassette are named
    by :func:`~lkeval.text.file_names.attempt_stem`, which writes ``a/b`` and ``a:b`` alike
    (``a_b``), and a later attempt of ``x`` as ``x.2``, which is also the first of ``x.2``.
    Sharing, one attempt's log would overwrite the other's and their cassettes would mix.
    ``seen`` holds each stem, and ``"#" + base`` for a stem that reads as ``base.N``."""
    found = []
    for site in sites:
        stem = file_stem(site.scenario_id)
        base, dot, number = stem.rpartition(".")
        numbered = bool(dot) and number.isdigit() and number != "1"
        clashes = [seen.get(stem), seen.get(base) if numbered else None, seen.get("#" + stem)]
        clash = next((c for c in clashes if c and c.scenario_id != site.scenario_id), None)
        seen.setdefault(stem, site)
        if numbered:
            seen.setdefault("#" + base, site)
        if clash is None:
            continue
        where = f"{clash.file}:{line_of(clash.node)}"
        message = (
            f"scenario id '{site.scenario_id}' would share its log and cassette files with "
            f"'{clash.scenario_id}' (at {where}): change one of the two ids"
        )
        mark = site.node.start_mark
        found.append(Diagnostic(site.file, mark.line + 1, mark.column + 1, site.field, message))
    return found


def _duplicate_ids(sites: list[_IdSite], seen: dict[str, _IdSite]) -> list[Diagnostic]:
    """Every scenario id must be unique: results, baselines and shards are keyed on it."""
    found = []
    for site in sites:
        first = seen.setdefault(site.scenario_id, site)
        if first is site:
            continue
        where = f"{first.file}:{line_of(first.node)}"
        if site.derived and first.derived:
            message = (
                f"same group name and label as the scenario at {where}, so both get the id "
                f"'{site.scenario_id}'; add a unique 'id:' to one of them"
            )
        elif site.derived:
            message = (
                f"derived id '{site.scenario_id}' is already used at {where}; add a unique 'id:'"
            )
        else:
            message = f"duplicate scenario id '{site.scenario_id}' (also at {where})"
        mark = site.node.start_mark
        found.append(Diagnostic(site.file, mark.line + 1, mark.column + 1, site.field, message))
    return found
