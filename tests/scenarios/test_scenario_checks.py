"""Which scenarios have nothing to check, decided from the file and the flags before anything
boots (``Scenario.nothing_to_check``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from report_fixtures import results_of, scenario

from lkeval.results.gate import evaluate_gate
from lkeval.scenarios.loader import load_scenario_file
from lkeval.scenarios.model import NOTHING_TO_CHECK, Scenario, min_pass_problem

FILE = """\
scenarios:
  - label: simulated, judged
    instructions: Book a room.
    agent_expectations: The agent books a room.
  - label: simulated, nothing to judge
    instructions: Book a room.
  - label: scripted with checks
    turns:
      - user: hi
        expect: [{message: {contains: hello}}]
  - label: scripted, expects nothing
    turns:
      - user: hi
  - label: scripted, expectations for the judge only
    agent_expectations: The agent greets.
    turns:
      - user: hi
  - label: scripted, only skips
    turns:
      - user: hi
        expect: [{skip: 2}]
      - user: bye
        expect: [{skip: 1}]
  - label: built-in judges only
    instructions: Book a room.
    judges: [safety]
  - label: scripted, then simulated and judged
    instructions: Book a room.
    agent_expectations: The agent books a room.
    then_simulate: true
    turns:
      - user: hi
"""


@pytest.fixture
def scenarios(tmp_path: Path) -> dict[str, Scenario]:
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(FILE))
    group, diagnostics = load_scenario_file(path)
    assert [d for d in diagnostics if d.is_error] == []
    return {s.label: s for s in group.scenarios}


def test_what_has_nothing_to_check_by_default(scenarios: dict[str, Scenario]) -> None:
    found = {
        label: s.nothing_to_check(judge_scripted=False, run_judges=())
        for label, s in scenarios.items()
    }
    assert found == {
        "simulated, judged": None,
        "simulated, nothing to judge": f"{NOTHING_TO_CHECK}: it has no agent_expectations or "
        "judges for the simulated user's conversation",
        "scripted with checks": None,
        "scripted, expects nothing": f"{NOTHING_TO_CHECK}: its turns expect nothing and it has "
        "no agent_expectations or judges",
        "scripted, expectations for the judge only": f"{NOTHING_TO_CHECK}: its turns expect "
        "nothing, and its agent_expectations are judged only when a judge model is named "
        "(--judge-model)",
        "scripted, only skips": f"{NOTHING_TO_CHECK}: its turns expect nothing (skip: checks "
        "no event) and it has no agent_expectations or judges",
        "built-in judges only": None,
        "scripted, then simulated and judged": None,
    }


def test_a_named_judge_model_and_run_judges_give_scenarios_something_to_check(
    scenarios: dict[str, Scenario],
) -> None:
    judged = scenarios["scripted, expectations for the judge only"]
    assert judged.nothing_to_check(judge_scripted=True, run_judges=()) is None
    assert scenarios["scripted, expects nothing"].nothing_to_check(
        judge_scripted=True, run_judges=()
    )
    for each in scenarios.values():
        assert each.nothing_to_check(judge_scripted=False, run_judges=("safety",)) is None


def _plan_file(tmp_path: Path, extra: str = "") -> list[Scenario]:
    path = tmp_path / "p.yaml"
    path.write_text(
        "scenarios:\n  - {label: A, instructions: hi, agent_expectations: x}\n"
        f"  - {{label: B, instructions: hi, agent_expectations: x{extra}}}\n"
    )
    group, diagnostics = load_scenario_file(path)
    assert [d for d in diagnostics if d.is_error] == []
    return list(group.scenarios)


def test_min_pass_above_the_run_count_is_a_problem_not_a_clamp(tmp_path: Path) -> None:
    scenarios = _plan_file(tmp_path)
    assert min_pass_problem(scenarios, None, None) is None
    assert min_pass_problem(scenarios, 3, 2) is None
    assert min_pass_problem(scenarios, None, 2) == (
        f"--min-pass 2 for 'A' ({tmp_path}/p.yaml:2) (and 1 more) is above its 1 run "
        "(no --repeat); give --repeat 2 or more"
    )
    assert min_pass_problem(scenarios, 2, 3) == (
        f"--min-pass 3 for 'A' ({tmp_path}/p.yaml:2) (and 1 more) is above its 2 runs "
        "(--repeat 2); give --repeat 3 or more"
    )


def test_a_scenarios_own_min_pass_counts_against_the_runs_flag(tmp_path: Path) -> None:
    scenarios = _plan_file(tmp_path, ", min_pass: 3")
    assert min_pass_problem(scenarios, 3, None) is None
    assert min_pass_problem(scenarios, 2, None) == (
        f"min_pass: 3 of 'B' ({tmp_path}/p.yaml:3) is above its 2 runs (--repeat 2); "
        "give --repeat 3 or more"
    )
    own = _plan_file(tmp_path, ", repeat: 4, min_pass: 3")
    assert min_pass_problem(own, 2, None) is None  # its own repeat wins
    assert own[1].runs(2, None) == (4, 3) and own[0].runs(2, None) == (2, 2)


# --- the gate counts them --------------------------------------------------------------------

UNCHECKED = f"{NOTHING_TO_CHECK}: it has no agent_expectations or judges"


def test_the_gate_fails_on_a_scenario_with_nothing_to_check() -> None:
    results = results_of(
        scenario("Books"),
        scenario("Chats", "skipped", reason=UNCHECKED, attempts=()),
    )
    gate = evaluate_gate(results, None)
    assert not gate.passed and gate.exit_code == 1
    assert gate.reasons == (
        "1 scenario had nothing to check: Chats (give each a check, or --allow-nothing-to-check)",
    )
    allowed = evaluate_gate(results, None, allow_nothing_to_check=True)
    assert allowed.passed and allowed.exit_code == 0
    assert allowed.reasons == (
        "all 1 scenario passed",
        "1 scenario had nothing to check: Chats (allowed)",
    )


def test_other_skips_and_quarantined_unchecked_scenarios_do_not_block() -> None:
    results = results_of(
        scenario("Books"),
        scenario("Filtered", "skipped", reason="not selected (tag a=b)", attempts=()),
        scenario("Flaky", "skipped", reason=UNCHECKED, attempts=(), quarantined=True),
    )
    assert evaluate_gate(results, None).passed
