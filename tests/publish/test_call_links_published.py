"""``lkeval report`` in Actions: the Markdown file links an audio call's WAV and SVG relative to
itself; the job summary links them to the run's artifacts page, built from the environment
only when each value is what GitHub sets (a hostile one links nothing)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from report_fixtures import msg, results_of, scenario, write_results

from lkeval.cli import main
from lkeval.publish.github.context import read_context
from lkeval.results.model import Attempt, AudioCallRecord, Verdict

GITHUB = {
    "GITHUB_ACTIONS": "true",
    "GITHUB_SERVER_URL": "https://github.example",
    "GITHUB_REPOSITORY": "acme/hotel",
    "GITHUB_RUN_ID": "4242",
    "GITHUB_EVENT_NAME": "push",
}
ARTIFACTS = "https://github.example/acme/hotel/actions/runs/4242#artifacts"


def report_in_actions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str
) -> tuple[str, str]:
    """Run ``lkeval report`` on a failed audio call in ``tmp_path/eval-results``: (the job
    summary, the Markdown file written to ``tmp_path/reports/report.md``)."""
    for name in list(os.environ):
        if name.startswith(("GITHUB_", "LKEVAL_", "RUNNER_")):
            monkeypatch.delenv(name)
    summary = tmp_path / "summary.md"
    for name, value in {**GITHUB, "GITHUB_STEP_SUMMARY": str(summary), **env}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    stem = "eval-results/logs/SCN_Spoken-0a1b2c3d-attempt1"
    call = AudioCallRecord(recording=f"{stem}.wav", timeline=f"{stem}.svg")
    conversation = (msg(1, "user", "B 4 2 7."), msg(1, "assistant", "Booked."))
    attempt = Attempt(
        "failed", transcript=conversation, verdicts=(Verdict("judge", "fail", "no"),), call=call
    )
    write_results(
        results_of(scenario("Spoken", "failed", attempts=(attempt,))), "eval-results/results.json"
    )
    argv = ["report", "--results", "eval-results/results.json", "--comment", "off"]
    assert main([*argv, "--markdown", "reports/report.md"]) == 1
    return summary.read_text(encoding="utf-8"), Path("reports/report.md").read_text("utf-8")


def test_the_summary_links_the_artifacts_and_the_file_links_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary, markdown = report_in_actions(tmp_path, monkeypatch)
    wav = "logs/SCN&#95;Spoken-0a1b2c3d-attempt1.wav"
    assert f"[<code>{wav}</code>]({ARTIFACTS})" in summary
    assert f"[<code>{wav.replace('logs', 'eval-results/logs')}</code>]" not in summary
    targets = re.findall(r"\]\(([^)]*)\)", markdown)
    assert "../eval-results/logs/SCN_Spoken-0a1b2c3d-attempt1.wav" in targets
    assert "../eval-results/logs/SCN_Spoken-0a1b2c3d-attempt1.svg" in targets
    assert ARTIFACTS not in targets


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("GITHUB_SERVER_URL", "https://github.example/x)[y](https://evil.example"),
        ("GITHUB_SERVER_URL", "javascript:alert(1)"),
        ("GITHUB_REPOSITORY", "acme/hotel)<img src=x>"),
        ("GITHUB_REPOSITORY", "../.."),
        ("GITHUB_RUN_ID", "4242#x)(y"),
    ],
)
def test_a_hostile_environment_value_links_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    summary, _ = report_in_actions(tmp_path, monkeypatch, **{name: value})
    assert "<code>eval-results/logs/SCN&#95;Spoken-0a1b2c3d-attempt1.wav</code>" in summary
    assert "#artifacts" not in summary and "evil" not in summary and "<img" not in summary


def test_the_evaluated_run_holds_the_files_in_the_workflow_run_recipe(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    run = "https://github.example/acme/hotel/actions/runs/99"
    event.write_text(f'{{"workflow_run": {{"html_url": "{run}", "head_sha": "abc"}}}}')
    env = {**GITHUB, "GITHUB_EVENT_NAME": "workflow_run", "GITHUB_EVENT_PATH": str(event)}
    assert read_context(env).artifacts_url == f"{run}#artifacts"
    event.write_text('{"workflow_run": {"html_url": "https://evil.example/actions/runs/99"}}')
    assert read_context(env).artifacts_url is None
