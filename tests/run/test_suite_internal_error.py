"""A bug that stops a run still leaves what the run has (issue 30.7).

A run that ended ``lk-eval: internal error: ...`` (exit 4) used to leave no results file at
all: every scenario that had finished was lost with it. The suite now writes the results (what
finished, every other scenario "not run (interrupted)", marked interrupted so it can never
pass), JUnit and the gate line before the exception goes on to the boundary, which says it is
a bug and, with ``--debug`` or ``LKEVAL_DEBUG=1``, prints its traceback.

The bug here is a progress display that raises when it shows the second result: a
collaborator the suite is handed, as every run is (a real agent plays the scenarios).
"""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest
import yaml
from conftest import TEST_AGENTS, run_argv
from test_engine import Quiet

from lkeval.cli import build_parser, report_error
from lkeval.cli.options import run_options
from lkeval.cli.run import _collaborators, suite_settings
from lkeval.errors import ExitCode
from lkeval.results.model import ScenarioResult
from lkeval.run.suite import Suite

EDGE = TEST_AGENTS / "edge_agent.py"


class _BrokenProgress(Quiet):
    """A progress display with a bug: it raises when it shows the second scenario's result."""

    def scenario_finished(self, result: ScenarioResult) -> None:
        super().scenario_finished(result)
        if len(self.finished) == 2:
            raise RuntimeError("a bug in the progress display")


def _scenarios(tmp_path: Path) -> Path:
    turn = {"user": "hello", "expect": [{"message": {"role": "assistant"}}]}
    scenarios = [{"id": f"s{i}", "label": f"Scenario {i}", "turns": [turn]} for i in (1, 2, 3)]
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"name": "Bug", "scenarios": scenarios}))
    return path


@pytest.mark.e2e
def test_a_bug_mid_run_writes_what_finished_junit_and_the_gate_then_exit_4(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-edge-not-a-secret")
    results, junit = tmp_path / "out" / "results.json", tmp_path / "out" / "junit.xml"
    argv = [*run_argv(EDGE, _scenarios(tmp_path), results), "--junit", str(junit)]
    options = run_options(build_parser().parse_args([*argv, "--concurrency", "1"]))
    out = io.StringIO()
    broken = _BrokenProgress()
    parts = dataclasses.replace(_collaborators(options, out), progress=lambda total: broken)
    with pytest.raises(RuntimeError) as caught:
        Suite(suite_settings(options), parts, out).run()
    written = json.loads(results.read_text())
    by_id = {s["scenario_id"].rsplit("/", 1)[-1]: s for s in written["scenarios"]}
    assert written["metadata"]["interrupted"] is True  # so it can never pass, nor become a baseline
    assert [by_id[s]["status"] for s in ("s1", "s2")] == ["passed", "passed"], by_id
    assert by_id["s3"]["status"] != "passed" and "interrupted" in by_id["s3"]["reason"]
    assert junit.read_text().count("<testcase") == 3
    assert "the run was interrupted" in out.getvalue(), out.getvalue()  # the gate line
    err = io.StringIO()
    assert report_error(caught.value, err) == ExitCode.INTERNAL
    assert err.getvalue().startswith("lk-eval: internal error: RuntimeError: a bug in")
    assert "Traceback" not in err.getvalue()
    debug = io.StringIO()
    assert report_error(caught.value, debug, debug=True) == ExitCode.INTERNAL
    assert debug.getvalue().startswith("Traceback (most recent call last):"), debug.getvalue()
    assert 'in scenario_finished\n    raise RuntimeError("a bug' in debug.getvalue()
