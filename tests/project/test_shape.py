"""No function in lkeval/ is longer than 60 lines: one that is holds more than one step of the
story it tells, and is split into the steps (docs/architecture.md, "Small and legible").

A function's length is its ``def`` to its last line (``ast``'s ``end_lineno - lineno + 1``),
docstring and comments included: what a reader has to hold at once. Nested functions count in
their outer function too. There is no allow-list.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "lkeval"
MAX_FUNCTION_LINES = 60


def long_functions(path: Path, root: Path = PACKAGE) -> list[str]:
    """``file:line name (N lines)`` for each function in ``path`` over the bound."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                where = path.relative_to(root)
                found.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_longer_than_60_lines() -> None:
    found = [f for path in sorted(PACKAGE.rglob("*.py")) for f in long_functions(path)]
    assert not found, f"split these into their steps (at most {MAX_FUNCTION_LINES} lines):\n" + (
        "\n".join(found)
    )


def test_the_checker_counts_a_function_from_its_def_to_its_last_line(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(59))
    (tmp_path / "fits.py").write_text(f"def fits():\n{body}\n", encoding="utf-8")
    (tmp_path / "long.py").write_text(f"async def long():\n{body}\n    return 1\n", "utf-8")
    assert long_functions(tmp_path / "fits.py", tmp_path) == []
    assert long_functions(tmp_path / "long.py", tmp_path) == ["long.py:1 long (61 lines)"]
