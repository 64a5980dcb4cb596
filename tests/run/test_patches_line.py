"""The run's one line about the speed patches (lkeval/run/patches_line.py): written once, before
the first scenario's own line that carries an agent's report, and inert."""

from __future__ import annotations

import io
import json
from pathlib import Path

from lkeval.results.model import Attempt, RunMetadata, RunResults, ScenarioResult
from lkeval.results.results_json import dump_results, load_results
from lkeval.run.patches_line import PatchesLine

ON = {"tool_schemas": "on (verified build_strict_openai_schema)", "idle_timers": "off (x)"}


class Display:
    def __init__(self, out: io.StringIO) -> None:
        self.out = out

    def scenario_started(self, scenario_id: str, label: str) -> None:
        self.out.write(f"start {scenario_id}\n")

    def scenario_finished(self, result: ScenarioResult) -> None:
        self.out.write(f"done {result.scenario_id}\n")


def _result(scenario_id: str, patches: dict[str, str]) -> ScenarioResult:
    attempt = Attempt(status="passed", speed_patches=patches)
    return ScenarioResult(
        scenario_id, scenario_id, "G", "G", "s.yaml", 1, "passed", attempts=(attempt,)
    )


def test_the_line_comes_once_from_the_first_agent_that_reported() -> None:
    out = io.StringIO()
    line = PatchesLine(Display(out), out)
    line.scenario_finished(_result("SCN_noAgent", {}))  # never booted: nothing to say yet
    line.scenario_started("SCN_a", "a")
    line.scenario_finished(_result("SCN_a", ON))
    line.scenario_finished(_result("SCN_b", {"tool_schemas": "off (other)"}))
    assert out.getvalue().splitlines() == [
        "done SCN_noAgent",
        "start SCN_a",
        "speed patches: tool_schemas on (verified build_strict_openai_schema), idle_timers off (x)",
        "done SCN_a",
        "done SCN_b",
    ]


def test_a_workflow_command_in_an_agent_s_report_is_made_inert() -> None:
    out = io.StringIO()
    PatchesLine(Display(out), out).scenario_finished(_result("SCN_a", {"x": "::error::boom"}))
    assert not any(line.startswith("::") for line in out.getvalue().splitlines())


def test_each_attempt_keeps_its_patches_in_results_json(tmp_path: Path) -> None:
    meta = RunMetadata("0", None, "a.py", ("s.yaml",), "now")
    path = tmp_path / "results.json"
    path.write_text(dump_results(RunResults(meta, (_result("SCN_a", ON),))), encoding="utf-8")
    assert json.loads(path.read_text())["scenarios"][0]["attempts"][0]["speed_patches"] == ON
    assert load_results(path).scenarios[0].attempts[0].speed_patches == ON
