"""The fork-safe workflow recipe: valid YAML, safe shape, and lkeval commands that parse."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from action_runner import container_step
from test_action import ep

from lkeval.cli import build_parser
from lkeval.cli.options import report_options, run_options

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / "examples" / "workflows"
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))


def load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads a bare `on` as true
    return data


def steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def test_pr_workflow_runs_without_write_access_and_uploads_always() -> None:
    wf = load("eval-pr.yml")
    assert list(wf["on"]) == ["pull_request"]
    assert wf["permissions"] == {"contents": "read"}
    upload = next(s for s in steps(wf) if str(s.get("uses", "")).startswith("actions/upload"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "eval-results/"
    pr_step = next(s for s in steps(wf) if "pr-number.txt" in s.get("run", ""))
    assert pr_step["if"] == "always()"


def test_comment_workflow_is_triggered_by_the_eval_and_never_runs_pr_code() -> None:
    pr, comment = load("eval-pr.yml"), load("eval-comment.yml")
    trigger = comment["on"]["workflow_run"]
    assert trigger["workflows"] == [pr["name"]] and trigger["types"] == ["completed"]
    assert comment["permissions"]["pull-requests"] == "write"
    uses = [str(s.get("uses", "")) for s in steps(comment)]
    assert not any(u.startswith("actions/checkout") for u in uses)
    download = next(s for s in steps(comment) if s.get("uses", "").startswith("actions/download"))
    assert download["with"]["name"] == "lk-eval-results"
    assert download["with"]["run-id"] == "${{ github.event.workflow_run.id }}"


def test_comment_jobs_of_one_pr_branch_never_race_on_the_comment() -> None:
    comment = load("eval-comment.yml")
    group = comment["concurrency"]["group"]
    assert "workflow_run.head_repository.full_name" in group
    assert "workflow_run.head_branch" in group
    (post,) = action_steps(comment)
    assert post["if"] == "steps.pr.outputs.number != ''"  # a stale run posts nothing


@pytest.mark.parametrize("name", ["eval-pr.yml", "eval-comment.yml"])
def test_no_expression_is_templated_into_a_shell_script(name: str) -> None:
    for step in steps(load(name)):
        assert "${{" not in step.get("run", ""), step.get("name")


def action_steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in steps(workflow) if str(s.get("uses", "")).startswith("org/lk-eval@")]


def lkeval_argv_of(step: dict[str, Any]) -> list[str]:
    """The lkeval argv the action's container runs for this step, as the runner starts it."""
    with_ = {
        k: str(v).replace("${{ steps.pr.outputs.number }}", "7")
        for k, v in step.get("with", {}).items()
    }
    container = container_step(ACTION, with_, token="ghs_x")
    assert container.argv == []
    return list(ep.build_plan(container.env).argv)


def test_the_action_steps_become_lkeval_commands_that_parse() -> None:
    parser = build_parser()
    (run,) = action_steps(load("eval-pr.yml"))
    args = parser.parse_args(lkeval_argv_of(run))
    options = run_options(args, environ={})
    assert args.command == "run"
    assert (options.report.comment, options.report.file("junit")) == (
        "off",
        "eval-results/junit.xml",
    )
    assert options.llm.timeout == 60  # from extra-args
    (report,) = action_steps(load("eval-comment.yml"))
    args = parser.parse_args(lkeval_argv_of(report))
    reporting = report_options(args, environ={})
    assert args.command == "report"
    assert (reporting.comment, reporting.fail_on, reporting.pr) == ("update", "never", 7)
    assert args.results == "eval-results/results.json" and reporting.file("junit") is None


def test_no_workflow_uses_the_renamed_args_input() -> None:
    for name in ("eval-pr.yml", "eval-comment.yml", "eval-sharded.yml"):
        for step in action_steps(load(name)):
            assert "args" not in step.get("with", {}), name
