"""Scenario-file mistakes through the real CLI: ``validate`` and ``run`` stop on them with exit 2
and one line naming file, line and field, before any agent boots."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HOTEL, clean_env, hotel_env, read_json, run_argv, run_lkeval

from lkeval.testing.llm_server import LLMServer

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


# --- inputs checked before the first agent boots ----------------------------------------------

SIMPLE = "scenarios:\n  - {label: A, instructions: hi, agent_expectations: The agent greets.}\n"


def _run_refused(tmp_path: Path, *flags: str) -> str:
    """``lkeval run`` with an agent that must never be imported: exit 2, nothing written."""
    (tmp_path / "s.yaml").write_text(SIMPLE)
    (tmp_path / "agent.py").write_text("raise SystemExit('never imported')\n")
    args = ["run", "--agent", "agent.py", "--scenarios", "s.yaml", "--no-github", *flags]
    done = lkeval(*args, "--caller-model", "c", "--judge-model", "j", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "lkeval-results" / "logs").exists()  # no agent ever started
    assert not (tmp_path / "lkeval-results" / "results.json").exists()
    return done.stderr


def test_a_missing_baseline_stops_the_run_before_any_agent_boots(tmp_path: Path) -> None:
    stderr = _run_refused(tmp_path, "--baseline", "base.json")
    assert "base.json" in stderr and "baseline" in stderr


def test_a_broken_baseline_stops_the_run_before_any_agent_boots(tmp_path: Path) -> None:
    (tmp_path / "base.json").write_text('{"format_version": 1, "scenarios": [')
    stderr = _run_refused(tmp_path, "--baseline", "base.json")
    assert "base.json" in stderr and "baseline" in stderr


def test_min_pass_above_the_runs_is_an_error_not_a_clamp(tmp_path: Path) -> None:
    stderr = _run_refused(tmp_path, "--min-pass", "2")
    assert "--min-pass 2 for 'A' (s.yaml:2) is above its 1 run (no --repeat); " in stderr
    stderr = _run_refused(tmp_path, "--repeat", "2", "--min-pass", "3")
    assert "give --repeat 3 or more" in stderr


# --- a scenario with nothing to check is not played, and the gate counts it -------------------

NOTHING = """\
name: Hotel front desk
scenarios:
  - label: Greets the guest
    turns:
      - expect: [{message: {contains: welcome}}]
  - label: Just chats
    agent_expectations: The agent chats.
    turns:
      - user: Hello there.
"""


@pytest.mark.e2e
def test_nothing_to_check_is_not_played_and_fails_the_gate_unless_allowed(
    tmp_path: Path, hotel_llm: LLMServer
) -> None:
    """One run (the gate fails), then the same results under ``--allow-nothing-to-check``:
    ``lkeval report`` and ``lkeval run`` take the flag from one definition
    (cli/flags.add_report_arguments) and judge the gate with one function, so the report
    stands for the allowed run without booting the agent again."""
    path = tmp_path / "s.yaml"
    path.write_text(NOTHING)
    results = tmp_path / "default" / "results.json"
    argv = [*run_argv(HOTEL / "agent.py", path, results), "--no-github"]
    proc = run_lkeval(argv, hotel_env(hotel_llm), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = proc.stdout.strip().splitlines()[-1]
    assert "1 scenario had nothing to check: Just chats" in gate, gate
    greets, chats = read_json(results)["scenarios"]
    assert greets["status"] == "passed", greets
    assert chats["status"] == "skipped" and chats["attempts"] == []
    assert chats["reason"] == (
        "nothing to check: its turns expect nothing, and its agent_expectations are "
        "judged only when a judge model is named (--judge-model)"
    )
    logs = sorted(p.name for p in (results.parent / "logs").glob("*.log") if "fork" not in p.name)
    assert logs == ["hotel-front-desk_greets-the-guest.log"]  # one agent booted

    argv = ["report", "--results", str(results), "--no-github", "--allow-nothing-to-check"]
    allowed = run_lkeval(argv, clean_env(), cwd=tmp_path)
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    gate = allowed.stdout.strip().splitlines()[-1]
    assert "1 scenario had nothing to check: Just chats (allowed)" in gate, gate


def test_a_suite_with_nothing_to_check_boots_no_agent(tmp_path: Path) -> None:
    """Decided before anything boots: no agent process, the gate says why (exit 3)."""
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: Idle\nscenarios:\n  - label: Just chats\n    turns:\n      - user: Hi.\n"
    )
    argv = [*run_argv(HOTEL / "agent.py", path, tmp_path / "out" / "results.json"), "--no-github"]
    proc = run_lkeval(argv, clean_env(), cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "1 scenario had nothing to check: Just chats" in proc.stdout.splitlines()[-1]
    (result,) = read_json(tmp_path / "out" / "results.json")["scenarios"]
    assert result["status"] == "skipped" and result["attempts"] == []
    assert result["reason"].startswith("nothing to check: its turns expect nothing")
    assert not [p for p in (tmp_path / "out" / "logs").glob("*.log") if "fork" not in p.name]
