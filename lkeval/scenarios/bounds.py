"""Upper bounds on a run's scale, the same for a scenario file's keys and for the flags.

A scenario file can come from a pull request, and a flag from a workflow input: ``repeat:
1000000`` once passed ``validate`` and grew ``run`` to 3.4 GB, deaf to Ctrl-C for minutes
while it planned; ``repeat: 99999999999999999999999`` crashed it (OverflowError). Each bound
sits far above what a real suite uses (a pass@k sample is 3-20 runs; an agent boots in
seconds; a simulated caller takes a handful of turns) and far below what breaks the runner.
``validate`` and ``run`` read the file through the same loader, so both refuse alike.

The file's YAML is bounded too, before any reader expands it. A 462-byte alias bomb under
``userdata`` once grew lk-eval to 3.4 GB. ``yaml.compose`` keeps an alias as a second reference
to its anchor's node, so the composed tree stays small; every later reader (``to_plain``, the
agent's JSON) would expand it. :func:`check_bounds` counts the expanded size over unique nodes
only, so a bomb costs nothing to refuse.
"""

from __future__ import annotations

from collections.abc import Sequence

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from lkeval.scenarios.model import Scenario

MAX_REPEAT = 1_000
"""Runs of one scenario (``repeat``, ``--repeat``); ``min_pass`` is at most ``repeat``."""
MAX_TURNS = 1_000
"""Caller turns in one simulated conversation (``max_turns``, ``--max-turns``)."""
MAX_TIMEOUT_SECONDS = 3_600.0
"""Any one timeout (``boot_timeout``, ``turn_timeout``, their flags, ``--llm-timeout``)."""
MAX_LLM_RETRIES = 20
"""Retries of one caller/judge request (``--llm-retries``, ``LKEVAL_LLM_RETRIES``), with backoff."""
MAX_REJUDGE = 20
"""Extra judge asks of a failed verdict (``--rejudge``)."""
MAX_CONCURRENCY = 256
"""Conversations at once (``--concurrency``): each holds an agent process or two."""
MAX_AGENT_LOG_MIB = 10_240
"""Log one agent may write (``--agent-log-limit``): it is disk, twice (raw and published)."""
MAX_RUNS = 100_000
"""Runs (scenarios x repeats) in one ``lkeval run``, after selection and sharding."""


def runs_problem(
    scenarios: Sequence[Scenario], repeat: int | None, min_pass: int | None
) -> str | None:
    """Why the selected scenarios, repeated, are too many runs for one ``lkeval run``."""
    total = sum(s.runs(repeat, min_pass)[0] for s in scenarios)
    if total <= MAX_RUNS:
        return None
    return (
        f"{total} runs ({len(scenarios)} scenarios with their repeats); at most {MAX_RUNS} "
        "fit one run: select fewer (--match, --tag), shard them (--shard), or repeat less"
    )


# Parsing is bounded, because a scenario file can come from a pull request: a 462-byte alias
# bomb once grew lk-eval to 3.4 GB. Real files (100 scenarios, long block scalars, userdata
# with SQL) are a few hundred KB, use a handful of anchors and nest about ten levels deep.
MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_ALIASES = 1_000  # references to anchors in one file
MAX_ALIAS_VALUES = 100_000  # values that aliases add once expanded
MAX_DEPTH = 100  # nesting of lists and mappings


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
