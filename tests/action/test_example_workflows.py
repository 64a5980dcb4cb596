"""The fork-safe workflow recipe: valid YAML, safe shape, and lkeval commands that parse."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from action_runner import container_step
from conftest import ROOT, clean_env
from report_fixtures import write_results
from test_action import ep

from lkeval import defaults
from lkeval.cli import build_parser
from lkeval.cli.options import report_options, run_options
from lkeval.results.model import (
    Attempt,
    RunMetadata,
    RunResults,
    ScenarioResult,
    SuiteFingerprint,
    Verdict,
)
from lkeval.results.results_json import load_results

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
    assert list(wf["on"]) == ["pull_request", "push"]
    assert wf["on"]["push"] == {"branches": ["main"]}  # main's runs: the baseline
    assert wf["permissions"] == {}
    assert wf["jobs"]["eval"]["permissions"] == {"contents": "read", "actions": "read"}
    upload = next(s for s in steps(wf) if str(s.get("uses", "")).startswith("actions/upload"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "eval-results/"
    # what `baseline: auto` looks for is what main's runs upload, kept longer than a PR's
    assert upload["with"]["name"] == defaults.BASELINE_ARTIFACT
    assert "90" in str(upload["with"]["retention-days"])
    pr_step = next(s for s in steps(wf) if "pr-number.txt" in s.get("run", ""))
    assert pr_step["if"] == "always()"


def test_comment_workflow_is_triggered_by_the_eval_and_never_runs_pr_code() -> None:
    pr, comment = load("eval-pr.yml"), load("eval-comment.yml")
    trigger = comment["on"]["workflow_run"]
    assert trigger["workflows"] == [pr["name"]] and trigger["types"] == ["completed"]
    assert comment["jobs"]["comment"]["permissions"]["pull-requests"] == "write"
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
    (run,) = [s for s in action_steps(load("eval-pr.yml")) if "command" not in s["with"]]
    args = parser.parse_args(lkeval_argv_of(run))
    options = run_options(args, environ={})
    assert args.command == "run"
    assert (options.report.comment, options.report.file("junit")) == (
        "off",
        "eval-results/junit.xml",
    )
    assert options.llm.timeout == 60  # from extra-args
    assert options.report.baseline == "github:"  # baseline: auto, the default branch
    (report,) = action_steps(load("eval-comment.yml"))
    args = parser.parse_args(lkeval_argv_of(report))
    reporting = report_options(args, environ={})
    assert args.command == "report"
    assert (reporting.comment, reporting.fail_on, reporting.pr) == ("update", "never", 7)
    assert reporting.baseline == "github:"
    assert args.results == "eval-results/results.json" and reporting.file("junit") is None


def calibrate_step(workflow: dict[str, Any]) -> dict[str, Any]:
    (step,) = [s for s in action_steps(workflow) if s["with"].get("command") == "calibrate"]
    return step


def test_main_runs_calibrate_on_its_results_before_uploading_them() -> None:
    """The recipe: on pushes to main only, after the run (also when its gate failed), on the
    run's own results and scenarios, before the upload that `baseline: auto` fetches; its
    failure never turns main red (uncalibrated results mean the default rule)."""
    wf = load("eval-pr.yml")
    eval_job = wf["jobs"]["eval"]["steps"]
    calibrate = calibrate_step(wf)
    (run,) = [s for s in action_steps(wf) if "command" not in s["with"]]
    upload = next(s for s in eval_job if str(s.get("uses", "")).startswith("actions/upload"))
    assert eval_job.index(run) < eval_job.index(calibrate) < eval_job.index(upload)
    assert calibrate["if"] == "${{ !cancelled() && github.event_name == 'push' }}"
    assert calibrate["continue-on-error"] is True
    for name in ("scenarios", "results"):
        assert calibrate["with"][name] == run["with"][name]
    assert upload["with"]["path"].rstrip("/") == str(Path(calibrate["with"]["results"]).parent)
    assert calibrate["env"] == run["env"]  # the same judge key: it measures the run's judge


def test_the_calibrate_step_calibrates_mains_results_through_the_real_cli(
    tmp_path: Path,
) -> None:
    """The recipe's step as the action runs it: its argv, through the real CLI, in a checkout
    laid out as the workflow says, against a local judge that tells the booking from its
    negative controls: the results file to be uploaded carries each scenario's calibration."""
    from report_fixtures import BOOKING_TRANSCRIPT

    from lkeval.results.model import Verdict
    from lkeval.scenarios.loader import load_or_raise
    from lkeval.testing.llm_server import LLMServer

    step = calibrate_step(load("eval-pr.yml"))
    argv = lkeval_argv_of(step)
    assert argv[0] == "calibrate" and "--junit" not in argv
    assert build_parser().parse_args(argv).command == "calibrate"
    scenarios = tmp_path / step["with"]["scenarios"]
    scenarios.parent.mkdir(parents=True)
    scenarios.write_text(
        "name: Booking\nscenarios:\n  - id: SCN_book\n    label: Books two nights\n"
        "    instructions: You want a room for two nights from March 3.\n"
        "    agent_expectations: The agent books the room from 2025-03-03 and confirms it.\n",
        encoding="utf-8",
    )
    scenario = load_or_raise([scenarios])[0][0].scenarios[0]
    attempt = Attempt(
        status="passed", transcript=BOOKING_TRANSCRIPT, verdicts=(Verdict("judge", "pass"),)
    )
    results = tmp_path / step["with"]["results"]
    write_results(
        RunResults(
            RunMetadata(
                lkeval_version="1.0.0",
                livekit_agents_version="1.8.9",
                agent="agent.py",
                scenario_files=(step["with"]["scenarios"],),
                started_at="2026-11-25T10:00:00+00:00",
                finished_at="2026-11-25T10:00:01+00:00",
                duration_seconds=1.0,
                suite=SuiteFingerprint({scenario.id: scenario.digest}),
            ),
            (ScenarioResult.of(scenario, "passed", "", attempts=(attempt,)),),
        ),
        results,
    )
    verdict = {"name": "submit_verdict", "arguments": {"reasoning": "r", "verdict": "pass"}}
    booked = (
        r'(?s)"agent_called": "book_room", "arguments": \{"check_in": "2025-03-03"'
        r'.*"from": "agent", "says": "Booked!'
    )
    rules = [
        {"last_user": booked, "tool_calls": [verdict]},
        {"tool_calls": [{**verdict, "arguments": {"reasoning": "r", "verdict": "fail"}}]},
    ]
    with LLMServer(rules) as llm:
        proc = subprocess.run(
            [sys.executable, "-m", "lkeval", *argv],
            cwd=tmp_path,
            env=clean_env(OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="not-a-key"),
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calibration = load_results(results).scenarios[0].calibration
    assert calibration is not None
    assert (calibration.false_passes, calibration.control_votes) == (0, 20)  # --votes 5
    assert (calibration.false_fails, calibration.good_votes) == (0, 20)


def test_no_workflow_uses_the_renamed_args_input() -> None:
    for name in ("eval-pr.yml", "eval-comment.yml", "eval-sharded.yml"):
        for step in action_steps(load(name)):
            assert "args" not in step.get("with", {}), name


# --- the sharded recipe when a shard is missing ----------------------------------------------


def sharded_step(name: str) -> dict[str, Any]:
    (report_job,) = [j for n, j in load("eval-sharded.yml")["jobs"].items() if n == "report"]
    return next(s for s in report_job["steps"] if s.get("name") == name)


def shard_results(
    tmp: Path,
    present: tuple[int, ...],
    total: int = 4,
    started_at: str = "2026-11-25T10:00:00+00:00",
) -> None:
    """What download-artifact leaves: shards/lkeval-shard-I/results.json for the shards that
    uploaded; each shard ran one scenario, all passed."""
    for i in present:
        scenario_result = ScenarioResult(
            scenario_id=f"s{i}",
            label=f"scenario {i}",
            group_id="g",
            group_name="Group",
            file="evals/scenarios.yaml",
            line=i,
            status="passed",
            attempts=(Attempt(status="passed", verdicts=(Verdict("judge", "pass"),)),),
        )
        metadata = RunMetadata(
            lkeval_version="1.0.0",
            livekit_agents_version="1.8.9",
            agent="agent.py",
            scenario_files=("evals/scenarios.yaml",),
            started_at=started_at,
            finished_at="2026-11-25T10:00:01+00:00",
            duration_seconds=1.0,
            shard=f"{i}/{total}",
            suite=SuiteFingerprint({f"s{k}": f"digest {k}" for k in range(1, total + 1)}),
        )
        write_results(
            RunResults(metadata, (scenario_result,)),
            tmp / "shards" / f"lkeval-shard-{i}" / "results.json",
        )


def run_step(step: dict[str, Any], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """One `run:` step as the runner runs it: bash -e -o pipefail, the workflow's env."""
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_missing_shard_still_gets_a_report_and_fails_the_gate_by_name(tmp_path: Path) -> None:
    shard_results(tmp_path, present=(1, 2, 4))
    bin_dir = str(Path(sys.executable).parent)
    env = clean_env(
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        LKEVAL_SHARDS=load("eval-sharded.yml")["env"]["LKEVAL_SHARDS"],
        COMMENT="off",
    )
    merge = run_step(sharded_step("Merge the shards"), tmp_path, env)
    assert merge.returncode == 0, merge.stdout + merge.stderr
    assert "found 3 of 4 shard results" in merge.stdout
    report_step = sharded_step("Report, comment and gate")
    assert "if" not in report_step, "the report runs whenever the merge did"
    report = run_step(report_step, tmp_path, env)
    assert report.returncode == 1, report.stdout + report.stderr
    assert "shard(s) 3/4 missing" in report.stdout + report.stderr
    assert (tmp_path / "merged" / "junit.xml").is_file()
    assert load_results(tmp_path / "merged" / "results.json").metadata.missing_shards == ("3/4",)


def test_every_shard_present_passes_the_gate(tmp_path: Path) -> None:
    shard_results(tmp_path, present=(1, 2, 3, 4))
    bin_dir = str(Path(sys.executable).parent)
    env = clean_env(PATH=f"{bin_dir}:{os.environ['PATH']}", LKEVAL_SHARDS="4", COMMENT="off")
    assert run_step(sharded_step("Merge the shards"), tmp_path, env).returncode == 0
    report = run_step(sharded_step("Report, comment and gate"), tmp_path, env)
    assert report.returncode == 0, report.stdout + report.stderr


def test_the_sharded_report_compares_with_mains_merged_results(tmp_path: Path) -> None:
    from github_server import github_server

    sharded = load("eval-sharded.yml")
    assert sharded["on"]["push"] == {"branches": ["main"]}
    assert sharded["jobs"]["report"]["permissions"]["actions"] == "read"
    upload = sharded_step("Upload the merged results")
    report_step = sharded_step("Report, comment and gate")
    assert f"--baseline-artifact {upload['with']['name']}" in report_step["run"]
    shard_results(tmp_path, present=(1, 2, 3, 4))
    bin_dir = str(Path(sys.executable).parent)
    with github_server() as gh:
        main_run = "2026-11-24T10:00:00+00:00"  # another run: a baseline is never the run it gates
        shard_results(tmp_path / "main", present=(1,), total=1, started_at=main_run)
        merged = tmp_path / "main" / "shards" / "lkeval-shard-1" / "results.json"
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as zipped:
            zipped.write(merged, "results.json")
        gh.add_run(
            workflow=".github/workflows/eval-sharded.yml",
            artifacts={upload["with"]["name"]: archive.getvalue()},
        )
        env = clean_env(
            PATH=f"{bin_dir}:{os.environ['PATH']}",
            LKEVAL_SHARDS="4",
            COMMENT="off",
            GITHUB_API_URL=gh.base_url,
            GITHUB_REPOSITORY="octo/agent",
            GITHUB_TOKEN=gh.token,
            GITHUB_EVENT_NAME="pull_request",
            GITHUB_WORKFLOW_REF="octo/agent/.github/workflows/eval-sharded.yml@refs/pull/1/merge",
        )
        assert run_step(sharded_step("Merge the shards"), tmp_path, env).returncode == 0
        report = run_step(report_step, tmp_path, env)
    out = report.stdout + report.stderr
    assert report.returncode == 0, out
    assert "baseline: main run #1" in out and gh.token not in out


def test_no_job_that_can_write_installs_from_git() -> None:
    for name in ("eval-pr.yml", "eval-comment.yml", "eval-sharded.yml"):
        wf = load(name)
        assert wf["permissions"] == {}, f"{name}: permissions are given per job"
        for job_name, job in wf["jobs"].items():
            scripts = " ".join(str(s.get("run", "")) for s in job["steps"])
            assert "git+" not in scripts, f"{name} {job_name} installs from git"
            for step in job["steps"]:
                if step.get("uses", "").startswith("actions/checkout"):
                    assert step["with"]["persist-credentials"] is False, f"{name} {job_name}"


def test_cassettes_workflow_records_on_main_and_replays_main_on_prs() -> None:
    wf = load("eval-cassettes.yml")
    assert set(wf["on"]) == {"push", "pull_request"} and wf["on"]["push"]["branches"] == ["main"]
    assert wf["jobs"]["eval"]["permissions"]["actions"] == "read"  # the artifacts API
    (run,) = action_steps(wf)
    inputs = run["with"]
    assert set(inputs) <= set(ACTION["inputs"])
    assert "'record'" in inputs["cassette-mode"] and "'auto'" in inputs["cassette-mode"]
    assert "'auto'" in inputs["cassettes-from"]
    uploads = {s["with"]["name"]: s for s in steps(wf) if "upload-artifact" in s.get("uses", "")}
    assert uploads["lk-eval-cassettes"]["with"]["path"] == inputs["cassettes"] + "/"
    assert all(u["if"] == "always()" for u in uploads.values())
    for step in steps(wf):
        assert "${{" not in step.get("run", "")


def results_of_run(step: dict[str, Any]) -> str | None:
    """The results file a step's ``lkeval run`` writes (the action's or the CLI's), else None."""
    if str(step.get("uses", "")).startswith("org/lk-eval"):
        given = step.get("with", {})
        if given.get("command", "run") != "run":
            return None
        assert "--logs-dir" not in str(given.get("extra-args", ""))
        return str(given.get("results") or ACTION["inputs"]["results"]["default"])
    script = str(step.get("run", ""))
    if "lkeval run" not in script:
        return None
    assert "--logs-dir" not in script
    argv = script.replace('"', "").split()
    return argv[argv.index("--results") + 1]


@pytest.mark.parametrize("name", sorted(p.name for p in WORKFLOWS.glob("*.yml")))
def test_every_run_uploads_its_results_folder_with_the_logs_and_calls(name: str) -> None:
    """The agents' logs and each audio call's WAV and SVG are written to ``logs/`` beside the
    results (each bounded: a log by --agent-log-limit, a WAV at 16 MiB, an SVG ~150 KB); the
    job summary and PR comment name them by their path inside the uploaded results folder. So
    each recipe that runs lk-eval uploads that folder, also when the gate failed."""
    checked = 0
    for job in load(name)["jobs"].values():
        uploads = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload")]
        for step in job["steps"]:
            results = results_of_run(step)
            if results is None:
                continue
            folder = str(Path(results).parent) + "/"
            assert any(
                u.get("if") in ("always()", "${{ !cancelled() }}")
                and folder in str(u["with"]["path"]).split()
                for u in uploads
            ), (name, folder, uploads)
            checked += 1
    assert checked or name == "eval-comment.yml"  # the comment recipe only reports
