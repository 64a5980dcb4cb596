"""The tests mirror the package: one folder per layer, tests/e2e/ for the modules that boot agents.

The layout is only useful while it holds, so a test module dropped flat into tests/, a folder
that names no layer, or two modules of the same name (test folders are not packages: pytest
imports each module by its file name) fail here with the file to move.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from conftest import ROOT

TESTS = ROOT / "tests"
PACKAGE = ROOT / "lkeval"
#: Folders that are not a layer of lkeval/: the Action and its image (action.yml, entrypoint.py,
#: lkeval_action/, Dockerfile), the repository's own checks, the tests that boot real agents.
NOT_LAYERS = {"action", "project", "e2e"}


def _test_modules() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def test_no_test_module_sits_flat_in_tests() -> None:
    flat = [p.name for p in TESTS.glob("test_*.py")]
    assert not flat, f"move these into the folder of the layer they test (tests/<layer>/): {flat}"


def test_each_test_folder_is_a_layer_of_the_package() -> None:
    layers = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    folders = {p.relative_to(TESTS).parts[0] for p in _test_modules() if p.parent != TESTS}
    assert folders - layers - NOT_LAYERS == set(), f"layers are {sorted(layers | NOT_LAYERS)}"
    assert not any(TESTS.rglob("__init__.py")), "test folders are not packages (see pyproject)"


def test_test_module_names_are_unique_across_folders() -> None:
    names = Counter(p.name for p in _test_modules())
    twice = sorted(name for name, count in names.items() if count > 1)
    assert not twice, f"rename one of each (pytest imports test modules by file name): {twice}"


def _marked_e2e(path: Path) -> bool:
    """Whether the module sets ``pytestmark`` to (a list holding) ``pytest.mark.e2e``."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            return "pytest.mark.e2e" in ast.unparse(node.value)
    return False


def test_every_module_in_tests_e2e_is_marked_e2e_as_a_whole() -> None:
    """``make test-fast`` (``-m "not e2e"``) must not boot agents: a module in tests/e2e/ marks
    every test it holds, so a test added there later is e2e too."""
    unmarked = [p.name for p in sorted((TESTS / "e2e").glob("test_*.py")) if not _marked_e2e(p)]
    assert not unmarked, f"add `pytestmark = pytest.mark.e2e` to {unmarked}"
