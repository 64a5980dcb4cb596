"""Scenario-file mistakes through the real CLI: ``validate`` and ``run`` stop on them with exit 2
and one line naming file, line and field, before any agent boots."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TYPO = """\
scenarios:
  - label: Books a room
    instructions: Book a double room.
    agent_expectation: The agent books a double room.
"""
TYPO_ERROR = (
    "s.yaml:4:5: error: scenarios[0].agent_expectation: unknown key 'agent_expectation' "
    "(did you mean 'agent_expectations'?); a misspelt key would silently drop what it holds"
)


def lkeval(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lkeval", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_misspelt_key_stops_validate_and_run(tmp_path: Path, command: str) -> None:
    (tmp_path / "s.yaml").write_text(TYPO)
    (tmp_path / "agent.py").write_text("raise SystemExit('never imported')\n")
    args = ["validate", "s.yaml"]
    if command == "run":
        args = ["run", "--agent", "agent.py", "--scenarios", "s.yaml", "--no-github"]
    done = lkeval(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert TYPO_ERROR in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "lkeval-results").exists()


def test_an_unknown_key_far_from_any_known_one_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(TYPO.replace("agent_expectation:", "notes:"))
    done = lkeval("validate", "s.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "s.yaml:4:5: warning: scenarios[0].notes: unknown key 'notes'" in done.stderr
