"""An audio call's WAV and SVG are linked from every report: relative to the Markdown file's
own folder, and to the run's artifacts page from a PR comment or job summary (GitHub cannot
link a file on the runner). A results file's paths may be hostile: nothing in them becomes a
live link, HTML, a mention or a workflow command."""

from __future__ import annotations

import dataclasses
import re

from report_fixtures import msg, results_of, scenario

from lkeval.reporters import MarkdownReporter, Report, build_report
from lkeval.reporters.call_links import artifact_path
from lkeval.results.gate import evaluate_gate
from lkeval.results.model import Attempt, AudioCallRecord, ScenarioResult, Verdict

ARTIFACTS = "https://github.example/acme/hotel/actions/runs/4242#artifacts"
WAV = "eval-results/logs/SCN_x-1a2b3c4d-attempt1.wav"
SVG = "eval-results/logs/SCN_x-1a2b3c4d-attempt1.svg"
CONVERSATION = (msg(1, "user", "Book a room."), msg(1, "assistant", "Booked."))


def call_scenario(label: str, status: str, recording: str, timeline: str) -> ScenarioResult:
    verdict = Verdict("judge", "pass" if status == "passed" else "fail", "why")
    call = AudioCallRecord(recording=recording, timeline=timeline)
    attempt = Attempt(status, transcript=CONVERSATION, verdicts=(verdict,), call=call)
    return scenario(label, status, attempts=(attempt,))


def report_of(*scenarios: ScenarioResult, **links: str | None) -> Report:
    results = results_of(*scenarios)
    return dataclasses.replace(build_report(results, None, evaluate_gate(results, None)), **links)


def links(markdown: str) -> list[tuple[str, str]]:
    """Every Markdown link in the report: (text, target)."""
    return re.findall(r"\[([^\]]*)\]\(([^)]*)\)", markdown)


def test_the_markdown_file_links_each_call_relative_to_its_own_folder() -> None:
    failing = call_scenario("Spoken booking", "failed", WAV, SVG)
    passing = call_scenario(
        "Greets", "passed", "eval-results/logs/b.wav", "eval-results/logs/b.svg"
    )
    report = MarkdownReporter().format(report_of(failing, passing, files_from="eval-results"))
    targets = [target for _, target in links(report)]
    # the failure block and the list of every call (the passing one too)
    assert targets.count("logs/SCN_x-1a2b3c4d-attempt1.wav") == 2
    assert targets.count("logs/SCN_x-1a2b3c4d-attempt1.svg") == 2
    assert "logs/b.wav" in targets and "logs/b.svg" in targets
    assert "🎧 The calls, to hear and see (2)" in report


def test_a_report_elsewhere_links_up_to_the_files() -> None:
    one = call_scenario("Spoken booking", "failed", WAV, SVG)
    report = MarkdownReporter().format(report_of(one, files_from="reports/pr"))
    assert "../../eval-results/logs/SCN_x-1a2b3c4d-attempt1.wav" in [t for _, t in links(report)]


def test_the_summary_and_comment_link_the_artifacts_page_naming_the_path_inside_it() -> None:
    one = call_scenario("Spoken booking", "failed", WAV, SVG)
    report = MarkdownReporter().format(
        report_of(one, artifacts_url=ARTIFACTS, artifacts_root="eval-results")
    )
    found = links(report)
    assert ("<code>logs/SCN&#95;x-1a2b3c4d-attempt1.wav</code>", ARTIFACTS) in found
    assert ("<code>logs/SCN&#95;x-1a2b3c4d-attempt1.svg</code>", ARTIFACTS) in found
    assert all(target == ARTIFACTS for _, target in found)


def test_a_file_outside_the_uploaded_folder_is_named_as_recorded() -> None:
    assert artifact_path("elsewhere/a.wav", "eval-results") == "elsewhere/a.wav"
    assert artifact_path("eval-results/logs/a.wav", "eval-results") == "logs/a.wav"
    assert artifact_path("eval-results/logs/a.wav", None) == "eval-results/logs/a.wav"


def test_without_a_place_to_link_to_the_files_are_named() -> None:
    report = MarkdownReporter().format(report_of(call_scenario("Spoken", "failed", WAV, SVG)))
    assert links(report) == []
    assert "<code>eval-results/logs/SCN&#95;x-1a2b3c4d-attempt1.wav</code>" in report


HOSTILE = (
    "x](https://evil.example/p) <img src=x onerror=alert(1)> @octocat\n"
    "::error file=a::pwned\n##[warning]pwned (javascript:alert(1)) `code`.wav"
)


def test_hostile_paths_stay_inert_in_every_kind_of_link() -> None:
    one = call_scenario("Spoken booking", "failed", HOSTILE, HOSTILE + ".svg")
    for extra in (
        {"files_from": "eval-results"},
        {"artifacts_url": ARTIFACTS, "artifacts_root": "eval-results"},
        {},
    ):
        report = MarkdownReporter().format(report_of(one, **extra))
        for text, target in links(report):
            assert target == ARTIFACTS or re.fullmatch(r"[A-Za-z0-9/._~%-]+", target), target
            assert "<img" not in text and "](" not in text
        assert "<img" not in report and "://evil" not in report  # no tag, no autolink
        assert "@octocat" not in report  # a zero-width space breaks the mention
        assert not any(line.lstrip().startswith("::") for line in report.splitlines())
        assert "##[" not in report
