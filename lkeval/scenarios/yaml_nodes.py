"""YAML with positions: read a scenario file into a node tree and report problems by line.

The scenario loader and the turn grammar both read values from ``yaml.compose`` nodes rather
than from ``yaml.safe_load`` output, because only nodes keep the line and column every message
must name. This module holds what they share: :class:`Diagnostic`, the per-file collector
:class:`FileProblems`, reading and parsing the file (bounded: :func:`check_bounds` refuses an
alias bomb before any reader expands it), and typed readers for single values.
"""

from __future__ import annotations

import codecs
import difflib
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from lkeval.scenarios.bounds import MAX_ALIAS_VALUES, MAX_ALIASES, MAX_DEPTH, MAX_FILE_BYTES
from lkeval.scenarios.typos import near_miss

Severity = Literal["error", "warning"]

NULL_TAG = "tag:yaml.org,2002:null"
BOOL_TAG = "tag:yaml.org,2002:bool"
INT_TAG = "tag:yaml.org,2002:int"
FLOAT_TAG = "tag:yaml.org,2002:float"
STR_TAG = "tag:yaml.org,2002:str"
TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
MERGE_TAG = "tag:yaml.org,2002:merge"
TAB_MESSAGE = "tab character in indentation; YAML allows only spaces"

# One constructor is enough: its scalar methods are pure functions of the node.
_SCALARS = yaml.constructor.SafeConstructor()


@dataclass(frozen=True)
class Diagnostic:
    """One problem in a scenario file; ``line``/``column`` are 1-based, None when unknown.

    ``field`` is the path of the value in the file, e.g.
    ``scenarios[3].turns[0].expect[1].function_call.name`` (indexes 0-based), or "" for
    problems of the whole file.
    """

    file: str
    line: int | None
    column: int | None
    field: str
    message: str
    severity: Severity = "error"

    @property
    def is_error(self) -> bool:
        """Errors stop the run; warnings are printed and the run goes on."""
        return self.severity == "error"

    def __str__(self) -> str:
        location = self.file
        if self.line is not None:
            location += f":{self.line}"
            if self.column is not None:
                location += f":{self.column}"
        subject = f"{self.field}: " if self.field else ""
        return f"{location}: {self.severity}: {subject}{self.message}"


class FileProblems:
    """Collects the diagnostics of one file, positioned at the node they concern."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.diagnostics: list[Diagnostic] = []

    def error(self, node: Node, path: str, message: str) -> None:
        """Something that stops the file from running."""
        self._add(node, path, message, "error")

    def warning(self, node: Node, path: str, message: str) -> None:
        """Something suspicious that still loads."""
        self._add(node, path, message, "warning")

    def at(self, line: int | None, message: str, column: int | None = None) -> None:
        """An error of the file itself (unreadable, bad YAML), where there is no node."""
        self.diagnostics.append(Diagnostic(self.file, line, column, "", message))

    def _add(self, node: Node, path: str, message: str, severity: Severity) -> None:
        mark = node.start_mark
        self.diagnostics.append(
            Diagnostic(self.file, mark.line + 1, mark.column + 1, path, message, severity)
        )


# --- the file -------------------------------------------------------------------------------


def read_document(path: Path, problems: FileProblems) -> Node | None:
    """The file's single YAML document as a node tree, or None after reporting why not."""
    text = _read_text(path, problems)
    return None if text is None else _compose(text, problems)


def _read_text(path: Path, problems: FileProblems) -> str | None:
    try:
        with path.open("rb") as file:  # read at most one byte over the limit (a FIFO never ends)
            data = file.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        problems.at(None, "file not found")
        return None
    except IsADirectoryError:
        problems.at(None, "is a directory; give the scenarios.yaml file itself")
        return None
    except PermissionError:
        problems.at(None, "file not readable: permission denied")
        return None
    except OSError as exc:
        problems.at(None, f"file not readable: {exc.strerror or exc}")
        return None
    if len(data) > MAX_FILE_BYTES:
        problems.at(
            None,
            f"file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB; "
            "split it into several scenario files",
        )
        return None
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        problems.at(line, f"not UTF-8 text (byte 0x{data[exc.start]:02x})")
        return None


def _compose(text: str, problems: FileProblems) -> Node | None:
    """libyaml is several times faster on 100-scenario files; on failure the pure-Python
    parser re-reads the text, so messages are the same whether libyaml is installed or not."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        root = yaml.compose(text, Loader=loader)
    except yaml.YAMLError:
        try:
            root = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError as exc:
            _report_yaml_error(exc, text, problems)
            return None
        except RecursionError:
            problems.at(None, f"nested more than {MAX_DEPTH} levels deep")
            return None
    if root is None:
        problems.at(1, "file is empty; expected a mapping with a 'scenarios:' list")
        return None
    refused = check_bounds(root)
    if refused is not None:
        problems.error(*refused)
        return None
    return root


def _children(node: Node) -> list[tuple[str, Node]]:
    """A node's direct values with the field suffix each adds (``.key`` or ``[i]``)."""
    if isinstance(node, SequenceNode):
        return [(f"[{i}]", item) for i, item in enumerate(node.value)]
    if isinstance(node, MappingNode):
        out: list[tuple[str, Node]] = []
        for key, value in node.value:
            name = f".{key.value}" if isinstance(key, ScalarNode) else ".?"
            out += [("", key), (name, value)]
        return out
    return []


def check_bounds(root: Node) -> tuple[Node, str, str] | None:
    """Why the document is out of bounds, as (node, field, message) to report, or None.

    ``yaml.compose`` keeps an alias as a second reference to its anchor's node, so the tree
    stays small; it is every later reader (``to_plain``, the agent's JSON) that would expand
    it. The expanded size is counted here over unique nodes only, so a bomb costs nothing.
    """
    sizes: dict[int, int] = {}
    refs: dict[int, int] = {}
    open_nodes: set[int] = set()
    aliases = 0
    stack: list[tuple[Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if done:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes.get(id(c), 0) for _, c in _children(node))
            continue
        refs[key] = refs.get(key, 0) + 1
        if key in sizes or key in open_nodes:  # a second reference: an alias (or a cycle)
            aliases += 1
            continue
        if depth > MAX_DEPTH:
            return node, "", f"nested more than {MAX_DEPTH} levels deep"
        open_nodes.add(key)
        stack.append((node, depth, True))
        stack.extend((c, depth + 1, False) for _, c in reversed(_children(node)))
    added = sizes[id(root)] - len(sizes)
    if aliases > MAX_ALIASES:
        return root, "", f"{aliases} YAML aliases; at most {MAX_ALIASES} are allowed"
    if added > MAX_ALIAS_VALUES:
        node, path = _where_it_expands(root, sizes, refs)
        return (
            node,
            path,
            f"YAML aliases expand this value to {sizes[id(node)]} values; at most "
            f"{MAX_ALIAS_VALUES} may come from aliases in a file (an alias bomb?)",
        )
    return None


def _where_it_expands(root: Node, sizes: dict[int, int], refs: dict[int, int]) -> tuple[Node, str]:
    """The value to name in the error: follow the largest unshared value down from the root
    to where the shared (aliased) ones begin."""
    node, path = root, ""
    while True:
        children = _children(node)
        if not children:
            return node, path
        suffix, child = max(children, key=lambda c: sizes.get(id(c[1]), 0))
        if refs.get(id(child), 0) > 1 or sizes.get(id(child), 0) <= MAX_ALIAS_VALUES:
            return node, path
        node, path = child, (path + suffix).lstrip(".")


def _report_yaml_error(exc: yaml.YAMLError, text: str, problems: FileProblems) -> None:
    if isinstance(exc, yaml.reader.ReaderError):
        line = text[: exc.position].count("\n") + 1
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        problems.at(line, f"YAML error: {exc.reason} (character 0x{char:x})")
        return
    mark = getattr(exc, "problem_mark", None)
    if mark is None:
        problems.at(None, f"YAML error: {exc}")
        return
    lines = text.splitlines()
    source = lines[mark.line] if mark.line < len(lines) else ""
    # A tab in indentation is the classic invisible mistake: name it instead of the
    # scanner's "found character that cannot start any token".
    indentation = source[: len(source) - len(source.lstrip(" \t"))]
    if "\t" in indentation:
        problems.at(mark.line + 1, TAB_MESSAGE, indentation.index("\t") + 1)
        return
    if source[mark.column : mark.column + 1] == "\t":
        problems.at(mark.line + 1, "tab character; YAML allows only spaces here", mark.column + 1)
        return
    problem = getattr(exc, "problem", None) or str(exc)
    message = f"YAML syntax error: {problem}"
    context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context and context_mark is not None and context_mark.line != mark.line:
        message += f" ({context} at line {context_mark.line + 1})"
    elif context:
        message += f" ({context})"
    if any(problem.startswith(words) for words in INDENTATION_PROBLEMS):
        message += indentation_hint(lines, mark.line)
    problems.at(mark.line + 1, message, mark.column + 1)


#: The parser's words for what is, in a hand-written scenario file, nearly always a line
#: indented one level too deep or too shallow.
INDENTATION_PROBLEMS = (
    "expected <block end>",
    "mapping values are not allowed here",
    "did not find expected key",
    "did not find expected '-' indicator",
)


def indentation_hint(lines: list[str], index: int) -> str:
    """``; check the indentation: line 5 has 6 spaces, line 4 above it has 4`` when the line
    the parser stopped at is indented unlike the line before it (else nothing)."""

    def indent(line: str) -> int:
        return len(line) - len(line.lstrip(" "))

    if index >= len(lines):
        return ""
    above = next(
        (
            n
            for n in range(index - 1, -1, -1)
            if lines[n].strip() and not lines[n].lstrip().startswith("#")
        ),
        None,
    )
    if above is None or indent(lines[index]) == indent(lines[above]):
        return ""
    return (
        f"; check the indentation: line {index + 1} has {indent(lines[index])} spaces, "
        f"line {above + 1} above it has {indent(lines[above])}"
    )


# --- values ---------------------------------------------------------------------------------


def line_of(node: Node) -> int:
    """The 1-based line a node starts on."""
    return int(node.start_mark.line) + 1


def is_null(node: Node | None) -> bool:
    """True for a missing value, ``~``, ``null`` or an empty ``key:``."""
    return node is None or (isinstance(node, ScalarNode) and node.tag == NULL_TAG)


def is_true(node: Node) -> bool:
    """True for a YAML ``true`` (any of its spellings)."""
    if not isinstance(node, ScalarNode) or node.tag != BOOL_TAG:
        return False
    return _SCALARS.construct_yaml_bool(node)


def describe(node: Node) -> str:
    """What a node is, in the words an error message needs ("a list", "a number (3)")."""
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    kinds = {
        NULL_TAG: "nothing (null)",
        BOOL_TAG: f"a boolean ({node.value})",
        INT_TAG: f"a number ({node.value})",
        FLOAT_TAG: f"a number ({node.value})",
        TIMESTAMP_TAG: f"a date ({node.value})",
        STR_TAG: "a string",
    }
    return kinds.get(node.tag, f"a value tagged {node.tag}")


def suggestion(key: str, allowed: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for a near miss, else an empty string."""
    close = difflib.get_close_matches(key, list(allowed), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def join(path: str, key: str) -> str:
    """The field path of ``key`` inside the value at ``path``."""
    return f"{path}.{key}" if path else key


def mapping_entries(
    node: MappingNode, path: str, problems: FileProblems
) -> dict[str, tuple[Node, Node]]:
    """The entries of a mapping by key, as (key node, value node).

    PyYAML silently keeps the last of two equal keys; LiveKit's Go loader refuses them, and
    either way one of the two values is lost, so a duplicate is an error here. ``<<`` merge
    keys are honoured, with explicit keys winning as YAML specifies.
    """
    explicit: dict[str, tuple[Node, Node]] = {}
    merged: dict[str, tuple[Node, Node]] = {}
    for key_node, value_node in node.value:
        if key_node.tag == MERGE_TAG:
            sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
            for source in sources:
                if not isinstance(source, MappingNode):
                    problems.error(source, path, "'<<' merges only mappings (or a list of them)")
                    continue
                for key, entry in mapping_entries(source, path, problems).items():
                    merged.setdefault(key, entry)
            continue
        if not isinstance(key_node, ScalarNode):
            problems.error(key_node, path, f"keys must be plain text, not {describe(key_node)}")
            continue
        key = str(key_node.value)
        if key in explicit:
            first = line_of(explicit[key][0])
            problems.error(key_node, join(path, key), f"duplicate key (first at line {first})")
            continue
        explicit[key] = (key_node, value_node)
    return {**merged, **explicit}


def check_keys(
    entries: dict[str, tuple[Node, Node]],
    allowed: Iterable[str],
    path: str,
    problems: FileProblems,
    *,
    strict: bool,
) -> None:
    """Report keys outside ``allowed``: errors in lk-eval's grammar, warnings elsewhere.

    Outside the strict grammar an unknown key is a warning (``lk agent simulate`` ignores it),
    except a near miss of a known key: ``instruction:`` or ``agent_expectation:`` would drop
    the check it was meant to be, and the run would pass on less than the author wrote.
    """
    allowed = tuple(allowed)
    for key, (key_node, _) in entries.items():
        if key in allowed:
            continue
        if strict:
            message = f"unknown key '{key}'{suggestion(key, allowed)}"
            problems.error(key_node, join(path, key), f"{message}; allowed: {', '.join(allowed)}")
            continue
        meant = near_miss(key, allowed)
        if meant is not None:
            problems.error(
                key_node,
                join(path, key),
                f"unknown key '{key}' (did you mean '{meant}'?); a misspelt key would "
                "silently drop what it holds",
            )
        else:
            problems.warning(
                key_node, join(path, key), f"unknown key '{key}'{suggestion(key, allowed)}"
            )


def read_str(
    node: Node, path: str, problems: FileProblems, *, non_empty: bool = False
) -> str | None:
    """A string value, or None after reporting why the node is not one."""
    if isinstance(node, ScalarNode) and node.tag == STR_TAG:
        text = str(node.value)
        if non_empty and not text.strip():
            problems.error(node, path, "must not be empty")
            return None
        return text
    hint = ""
    if isinstance(node, ScalarNode) and node.tag != NULL_TAG:
        hint = f"; quote it: '{node.value}'"
    problems.error(node, path, f"must be a string, got {describe(node)}{hint}")
    return None


def read_bool(node: Node, path: str, problems: FileProblems) -> bool | None:
    """A boolean value (true/false), or None after reporting."""
    if isinstance(node, ScalarNode) and node.tag == BOOL_TAG:
        return _SCALARS.construct_yaml_bool(node)
    problems.error(node, path, f"must be true or false, got {describe(node)}")
    return None


def read_positive_int(
    node: Node, path: str, problems: FileProblems, maximum: int | None = None
) -> int | None:
    """An integer >= 1 (and <= ``maximum``), or None after reporting."""
    if isinstance(node, ScalarNode) and node.tag == INT_TAG:
        value = _SCALARS.construct_yaml_int(node)
        if value >= 1 and (maximum is None or value <= maximum):
            return value
    wanted = "of at least 1" if maximum is None else f"from 1 to {maximum}"
    problems.error(node, path, f"must be a whole number {wanted}, got {describe(node)}")
    return None


def read_positive_number(
    node: Node, path: str, problems: FileProblems, maximum: float = math.inf
) -> float | None:
    """A finite number > 0 (seconds, at most ``maximum``), or None after reporting."""
    if isinstance(node, ScalarNode) and node.tag in (INT_TAG, FLOAT_TAG):
        value = float(_SCALARS.construct_yaml_float(node))
        if 0 < value <= maximum and math.isfinite(value):
            return value
    wanted = "" if maximum == math.inf else f" up to {maximum:g}"
    problems.error(
        node, path, f"must be a positive number of seconds{wanted}, got {describe(node)}"
    )
    return None


def to_plain(
    node: Node, path: str, problems: FileProblems, _active: frozenset[int] = frozenset()
) -> Any:
    """Convert a node to JSON-able Python (dict/list/str/int/float/bool/None).

    Used for ``userdata`` and function arguments, which travel to the agent and the checks as
    JSON: dates stay the text they were written as, and keys become strings.
    """
    if id(node) in _active:
        problems.error(node, path, "recursive alias; the value must be finite to become JSON")
        return None
    active = _active | {id(node)}
    if isinstance(node, MappingNode):
        return {
            key: to_plain(value, join(path, key), problems, active)
            for key, (_, value) in mapping_entries(node, path, problems).items()
        }
    if isinstance(node, SequenceNode):
        return [
            to_plain(item, f"{path}[{i}]", problems, active) for i, item in enumerate(node.value)
        ]
    if not isinstance(node, ScalarNode) or node.tag == NULL_TAG:
        return None
    if node.tag == BOOL_TAG:
        return _SCALARS.construct_yaml_bool(node)
    if node.tag == INT_TAG:
        return _SCALARS.construct_yaml_int(node)
    if node.tag == FLOAT_TAG:
        number = _SCALARS.construct_yaml_float(node)
        if not math.isfinite(number):
            problems.error(node, path, f"{node.value} has no JSON form; quote it or use a number")
        return number
    if not node.tag.startswith("tag:yaml.org,2002:"):
        problems.error(node, path, f"unsupported YAML tag '{node.tag}'")
    return str(node.value)
