"""The folders are the pipeline: imports inside lkeval only point down it, and never in a cycle.

Read from the source with ``ast`` (no import side effects), so a new upward import or cycle
fails here with the module and the line, not later as a surprise at import time.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import lkeval

PACKAGE = Path(lkeval.__file__).parent

#: Layers from the top of the pipeline to the bottom; a module may import its own layer and
#: any layer below it. ``text`` (masking, inert text, clipping) is the lowest, so every layer
#: may use it; ``errors``, ``defaults``, ``startup``, ``impairments`` (the impairment spec's
#: grammar, which the scenario loader checks) and the package root are the floor everyone may use.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"cli", "pytest_plugin"}),
    frozenset({"inproc"}),
    frozenset({"llm", "publish"}),
    frozenset({"run", "reporters"}),
    frozenset({"audio"}),
    frozenset({"replay"}),
    frozenset({"results"}),
    frozenset({"agents", "scenarios"}),
    frozenset({"text"}),
    frozenset({"host"}),
)
FLOOR = frozenset({"errors", "defaults", "startup", "impairments", ""})
#: Imports the layer order alone would allow but the design does not: the command line builds
#: collaborators and calls the run (``run/suite.py``), which alone starts and stops agents.
FORBIDDEN: dict[str, frozenset[str]] = {
    "cli": frozenset({"agents"}),
    # Audio mode's parts (voice, impairments, recordings) know nothing of agents, scenarios or
    # cassettes: the run hands them text and PCM.
    "audio": frozenset({"agents", "scenarios", "replay"}),
}
#: The program that runs in the agent's interpreter (loaded there by path): its own folder.
HOST = PACKAGE / "host"
#: Test helpers stand apart: nothing of the product imports them...
SEPARATE = frozenset({"testing"})
#: ...but ``--speech local`` asks for the local speech server by name (docs/audio.md): the
#: run's speech starts it, and nothing else of the product may.
STARTS_TEST_HELPERS = frozenset({"lkeval.run.speech"})


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str | None = None) -> list[tuple[str, int]]:
    """(imported lkeval name, line) of every import in ``path``, function-level ones too."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    module = module or _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.startswith("lkeval")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level-1 packages
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base == "lkeval" or base.startswith("lkeval."):
                found += [(f"{base}.{a.name}", node.lineno) for a in node.names]
    return found


def _resolve(name: str, modules: set[str]) -> str | None:
    """The lkeval module an import names (``from lkeval.x import y``: y if a module, else x)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _graph() -> dict[str, list[tuple[str, int]]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(files)
    graph: dict[str, list[tuple[str, int]]] = {}
    for name, path in files.items():
        edges = [(_resolve(target, modules), line) for target, line in _imports(path)]
        graph[name] = [(t, line) for t, line in edges if t is not None and t != name]
    return graph


def _folder(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _rank(folder: str) -> int | None:
    return next((i for i, layer in enumerate(LAYERS) if folder in layer), None)


def test_every_folder_has_a_layer() -> None:
    folders = {_folder(m) for m in _graph()}
    known = set().union(*LAYERS) | FLOOR | SEPARATE | {"__main__"}
    assert folders <= known, f"new folder(s) {folders - known}: give them a layer here"


def _upward(graph: dict[str, list[tuple[str, int]]]) -> list[str]:
    """Every import that points up the pipeline (or into the test helpers), with its line."""
    upward = []
    for module, edges in graph.items():
        here = _folder(module)
        for target, line in edges:
            there = _folder(target)
            if there in FLOOR or there == here or here in ("", "__main__"):
                continue
            if there in SEPARATE and module in STARTS_TEST_HELPERS:
                continue
            if there in SEPARATE and here not in SEPARATE:
                upward.append(f"{module}:{line} imports the test helper {target}")
                continue
            if there in FORBIDDEN.get(here, ()):
                upward.append(f"{module}:{line} imports {target} (through {there}/: forbidden)")
                continue
            mine, theirs = _rank(here), _rank(there)
            if mine is not None and theirs is not None and theirs < mine:
                upward.append(f"{module}:{line} imports {target} (upward)")
    return upward


def test_imports_only_point_down_the_pipeline() -> None:
    upward = _upward(_graph())
    assert upward == [], "\n".join(upward)


def test_no_import_cycles() -> None:
    graph = {m: sorted({t for t, _ in edges}) for m, edges in _graph().items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 visiting, 2 done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert cycles == [], "\n".join(" -> ".join(c) for c in cycles)


def _unguarded_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The imports a module runs whatever is installed: at its top level, also under ``if``
    (not inside a function, nor a ``try`` that handles a missing library, nor a file's
    ``if __name__ == "__main__"`` block for its maintainers)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and "__main__" not in ast.unparse(node.test):
            yield from _unguarded_imports(node.body)
            yield from _unguarded_imports(node.orelse)


def _host_problems(path: Path) -> list[str]:
    """Why a file cannot live in ``lkeval/host/``: it imports lk-eval from outside the folder,
    or, unguarded, a library that is neither the standard library nor livekit."""
    problems = [
        f"{path.name}:{line} imports {name}"
        for name, line in _imports(path, module=f"lkeval.host.{path.stem}")
        if not name.startswith("lkeval.host")
    ]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in _unguarded_imports(tree.body):
        if isinstance(node, ast.ImportFrom) and node.level:
            continue  # a sibling
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
        for name in names:
            root = (name or "").split(".")[0]
            if root not in sys.stdlib_module_names and root not in ("livekit", "lkeval"):
                problems.append(f"{path.name}:{node.lineno} imports {name} unguarded")
    return problems


def test_the_host_folder_imports_only_the_standard_library_livekit_and_itself() -> None:
    # The rule is on the folder: a new file there is checked without any list to keep.
    problems = [p for path in sorted(HOST.glob("*.py")) for p in _host_problems(path)]
    assert problems == [], "lkeval/host runs in the agent's venv: stdlib + livekit only"


def test_the_host_rule_sees_an_import_of_lkeval_and_an_unguarded_library(tmp_path: Path) -> None:
    fake = tmp_path / "fake.py"
    fake.write_text(
        "import os\nimport requests\nfrom . import pins\nfrom lkeval.text import masking\n"
        "try:\n    import httpx\nexcept ImportError:\n    httpx = None\n"
        "def f():\n    import aiohttp\n",
        encoding="utf-8",
    )
    assert _host_problems(fake) == [
        "fake.py:4 imports lkeval.text.masking",
        "fake.py:2 imports requests unguarded",
    ]


def test_only_the_host_folder_loads_files_by_path() -> None:
    # What the agent's interpreter runs is the host folder: nothing else of lk-eval is loaded
    # into it by file path (the host's one loader is host/siblings.py).
    loaders = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "spec_from_file_location" in path.read_text(encoding="utf-8")
        and HOST not in path.parents
        and "testing" not in path.parts
    )
    assert loaders == []


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    # The checker itself can fail: a relative import inside a function, from results up to cli.
    fake = tmp_path / "fake.py"
    fake.write_text("def f():\n    from ..cli import main\n", encoding="utf-8")
    edges = _imports(fake, module="lkeval.results.fake")
    assert edges == [("lkeval.cli.main", 2)]
    graph = {"lkeval.results.fake": [("lkeval.cli", 2)], "lkeval.cli": [("lkeval.results", 9)]}
    assert _upward(graph) == ["lkeval.results.fake:2 imports lkeval.cli (upward)"]
    skipping = {"lkeval.cli.fake": [("lkeval.agents.process", 3)]}
    assert _upward(skipping) == [
        "lkeval.cli.fake:3 imports lkeval.agents.process (through agents/: forbidden)"
    ]


def test_text_safety_uses_the_standard_library_only() -> None:
    # The Action's entrypoint masks with lkeval.text before it installs anything; a third-party
    # import here would make masking depend on what the agent's install left in the image.
    import sys

    for path in (PACKAGE / "text").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or name.startswith("lkeval.text"), (
                    f"{path.name}:{node.lineno} imports {name}"
                )
