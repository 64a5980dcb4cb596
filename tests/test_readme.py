"""The README stays true: its --help block, its scenario example, its make targets."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from lkeval.scenarios.loader import load_scenario_file

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.DOTALL)


def test_help_block_matches_the_real_help() -> None:
    (block,) = [b for b in _blocks("text") if b.startswith("usage: lkeval")]
    env = {**os.environ, "COLUMNS": "80"}
    real = subprocess.run(
        [sys.executable, "-m", "lkeval", "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    assert block.strip() == real.strip()


def test_scenario_example_is_a_valid_file(tmp_path: Path) -> None:
    (block,) = [b for b in _blocks("yaml") if "scenarios:" in b and "turns:" in b]
    path = tmp_path / "scenarios.yaml"
    path.write_text(block, encoding="utf-8")
    group, diagnostics = load_scenario_file(path)
    assert [d for d in diagnostics if d.is_error] == []
    (scenario,) = group.scenarios
    assert len(scenario.turns) == 3 and scenario.repeat == 3 and scenario.min_pass == 2


def test_make_targets_named_in_the_readme_exist() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in re.findall(r"^make ([\w-]+)", README, flags=re.MULTILINE):
        assert re.search(rf"^{target}:", makefile, flags=re.MULTILINE), target
