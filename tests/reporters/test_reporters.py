"""Reporters: golden outputs, an independent JUnit reader, the JUnit XSD, Markdown budgets."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
import xmlschema
from conftest import TEST_DATA
from junitparser import Error, Failure, JUnitXml, Skipped
from report_fixtures import (
    CANCEL_TRANSCRIPT,
    assert_golden,
    baseline_results,
    msg,
    results_of,
    run_results,
    scenario,
    write_results,
)

from lkeval.cli import main
from lkeval.errors import ExitCode
from lkeval.reporters import (
    REPORTER_BY_NAME,
    JUnitReporter,
    MarkdownReporter,
    Report,
    Reporter,
    build_report,
)
from lkeval.results.baseline import compare
from lkeval.results.gate import evaluate_gate
from lkeval.results.model import Attempt, RunResults
from lkeval.results.results_json import dump_results, results_from_dict
from lkeval.text.masking import mask

XSD = TEST_DATA / "junit.xsd"
RUN_URL = "https://github.com/acme/hotel/actions/runs/42"


def make_report(results: RunResults | None = None, **options: object) -> Report:
    results = results or run_results()
    comparison = compare(results, baseline_results())
    gate = evaluate_gate(results, comparison, "any", None)
    return build_report(results, comparison, gate, run_url=RUN_URL, **options)


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(XSD))


# --- golden files --------------------------------------------------------------------------


def test_markdown_golden() -> None:
    assert_golden("report.md", MarkdownReporter().format(make_report()))


def test_markdown_trimmed_golden() -> None:
    out = MarkdownReporter().format(make_report(max_chars=2000))
    assert len(out) <= 2000
    assert_golden("report-trimmed.md", out)


def test_junit_golden() -> None:
    assert_golden("report.xml", JUnitReporter().format(make_report()))


def test_output_is_deterministic() -> None:
    for cls in REPORTER_BY_NAME.values():
        assert cls().format(make_report()) == cls().format(make_report())


# --- registry --------------------------------------------------------------------------------


def test_every_registered_reporter_renders_every_outcome() -> None:
    assert set(REPORTER_BY_NAME) == {"junit", "markdown"}
    report = make_report()
    for name, cls in REPORTER_BY_NAME.items():
        reporter = cls()
        assert isinstance(reporter, Reporter)
        assert reporter.name == name
        out = reporter.format(report)
        for s in report.results.scenarios:
            assert s.label in out.replace("&amp;", "&"), (name, s.label)


class _CountsReporter(Reporter):
    """A format the package does not have: one line of counts, masked like every report."""

    name = "counts"
    description = "a one-line count of passed scenarios"
    label = "Counts"

    def format(self, report: Report) -> str:
        passed = report.results.count("passed")
        return mask(f"{passed}/{len(report.results.scenarios)} passed\n")


def test_a_new_format_is_one_class_plus_one_registry_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Registered here and nowhere else: the flag, its help, the writability check, the
    # masked write and the ``reports:`` line must all follow from the one entry.
    monkeypatch.setitem(REPORTER_BY_NAME, _CountsReporter.name, _CountsReporter)
    for command in ("run", "report"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        shown = " ".join(capsys.readouterr().out.split())
        assert "--counts PATH write a one-line count of passed scenarios here" in shown, command
    results = tmp_path / "results.json"
    write_results(results_of(scenario("a"), scenario("b", "failed")), results)
    out = tmp_path / "deep" / "counts.txt"
    code = main(["report", "--results", str(results), "--no-github", "--counts", str(out)])
    assert code == ExitCode.GATE_FAILED
    assert out.read_text(encoding="utf-8") == "1/2 passed\n"
    assert f"reports: Counts {out}" in capsys.readouterr().out
    (tmp_path / "a-dir").mkdir()
    unwritable = ["--counts", str(tmp_path / "a-dir")]
    assert main(["report", "--results", str(results), "--no-github", *unwritable]) == 2


def test_results_file_round_trips() -> None:
    # The results JSON is not a reporter (it is what reporters read); it still loses nothing.
    assert results_from_dict(json.loads(dump_results(run_results()))) == run_results()


# --- JUnit read back by junitparser and validated by the XSD --------------------------------


def test_junit_read_by_junitparser() -> None:
    xml = JUnitXml.fromstring(JUnitReporter().format(make_report()).encode())
    suites = {suite.name: suite for suite in xml}
    assert list(suites) == ["Room booking", "Front desk"]
    cases = {case.name: case for suite in xml for case in suite}
    assert cases["Simple room booking"].is_passed
    assert cases["Simple room booking"].classname == "Room booking"
    assert cases["Simple room booking"].time == pytest.approx(3.25)
    assert cases["Cancel a booking"]._elem.get("file") == "evals/booking.yaml"
    assert cases["Cancel a booking"]._elem.get("line") == "21"

    (failure,) = cases["Cancel a booking"].result
    assert isinstance(failure, Failure)
    assert "\n" not in failure.message
    assert "agent veto: fail — booking GH-1042 still active" in failure.text
    assert "judge: fail — The agent told the guest the cancellation worked." in failure.text
    assert "turn 1, expectation 2 (line 33)" in failure.text

    (repeated,) = cases["Suite booking (repeated)"].result
    assert isinstance(repeated, Failure)
    assert repeated.message.startswith("2/3 runs passed, needs 3")

    (error,) = cases["Late check-out"].result
    assert isinstance(error, Error)
    assert error.message == "agent crashed before connecting (job crashed)"
    assert "KeyError: 'guest'" in error.text
    assert "\x1b" not in error.text  # ANSI colours of the agent log are stripped

    (quarantined,) = cases["Greets by name"].result
    assert isinstance(quarantined, Skipped)
    assert quarantined.message.startswith("quarantined: failed (")
    (skipped,) = cases["Spa appointment"].result
    assert isinstance(skipped, Skipped)

    out = cases["Cancel a booking"].system_out
    assert "→ call cancel_booking" in out and "← cancel_booking ERROR" in out
    assert "<script>" in out  # escaped in XML, the text itself read back intact
    assert "⇄ handoff FrontDesk → Concierge" in cases["Handoff to concierge"].system_out


def test_junit_quarantined_failure_is_not_counted_as_failure() -> None:
    xml = JUnitXml.fromstring(JUnitReporter().format(make_report()).encode())
    xml.update_statistics()
    assert (xml.tests, xml.failures, xml.errors) == (7, 2, 1)
    front = next(s for s in xml if s.name == "Front desk")
    assert (front.failures, front.errors, front.skipped) == (0, 1, 2)


def test_junit_validates_against_xsd(schema: xmlschema.XMLSchema) -> None:
    schema.validate(JUnitReporter().format(make_report()))


def test_junit_suites_carry_the_latency_conditions(schema: xmlschema.XMLSchema) -> None:
    results = run_results()
    meta = replace(results.metadata, conversation_mode="text", inference_class="low")
    xml = JUnitReporter().format(make_report(replace(results, metadata=meta)))
    schema.validate(xml)
    assert xml.count('<property name="lkeval.inference_class" value="low" />') == xml.count(
        "<testsuite "
    )


def test_junit_survives_hostile_text(schema: xmlschema.XMLSchema) -> None:
    nasty = 'bell\x07 nul\x00 esc\x1b[31m red ]]> <tag> & "q" \ud800 end'
    s = scenario(
        nasty,
        "failed",
        reason=nasty,
        attempts=(Attempt(status="failed", transcript=(msg(1, "user", nasty),)),),
    )
    out = JUnitReporter().format(make_report(results_of(s)))
    schema.validate(out)
    case = next(iter(next(iter(JUnitXml.fromstring(out.encode())))))
    assert "]]> <tag> &" in case.name


def test_junit_empty_run_is_valid(schema: xmlschema.XMLSchema) -> None:
    out = JUnitReporter().format(make_report(results_of()))
    schema.validate(out)
    assert 'tests="0"' in out


# --- Markdown ----------------------------------------------------------------------------------


def test_markdown_headline_counts_and_usage() -> None:
    out = MarkdownReporter().format(make_report())
    first = out.splitlines()[0]
    assert first == "## lk-eval: ❌ gate failed — 3 scenarios failed or errored"
    assert "2 passed · 2 failed · 1 errored · 1 skipped · 1 quarantined" in out
    assert "pass rate 40.0% (2/5)" in out
    assert "1 regressed, 1 fixed, 1 new, 1 removed vs baseline `fedcba987654`" in out
    assert "agent 3,000 in / 350 out ($0.0021)" in out
    assert "| ❌ | Cancel a booking | Room booking | 1 | 0 |  | $0.0025 | 🔻 regression |" in out
    assert "| ❌ | Suite booking (repeated) | Room booking | 2/3 (needs 3) |" in out
    assert "| ➖ | Parking question |" in out
    # failed, repeated, error (its log), quarantined failure; then the table of all scenarios
    assert out.count("<details>") == 5
    table = out.index("<summary>All 8 scenarios")
    for label in (
        "Cancel a booking",
        "Suite booking (repeated)",
        "Late check-out",
        "Greets by name",
    ):
        assert -1 < out.index(f"{label}**") < table  # every failure's details before any row


def test_markdown_passing_headline() -> None:
    results = results_of(scenario("a"), scenario("b"))
    report = build_report(results, None, evaluate_gate(results, None))
    out = MarkdownReporter().format(report)
    assert out.startswith("## lk-eval: ✅ gate passed — all 2 scenarios passed\n")
    assert "vs baseline" not in out
    assert "Transcript" not in out and "### " not in out  # no failure sections
    assert "| Runs |" not in out  # no empty Runs column without --repeat


def test_markdown_escapes_cells_and_details() -> None:
    out = MarkdownReporter().format(make_report())
    # The transcript is in a fenced code block, where HTML is shown, never rendered.
    assert "<script>" not in outside_code_blocks(out)
    assert "```\n[1] user: Cancel booking" in out
    assert "Done! <script>alert('x')</script> & all set." in out
    s = scenario("pipe | and\nnewline <b>x</b>", "failed", group_name="G|H")
    out = MarkdownReporter().format(make_report(results_of(s)))
    row = next(line for line in out.splitlines() if line.startswith("| ❌"))
    assert "pipe &#124; and newline &lt;b&gt;x&lt;/b&gt;" in row
    assert "G&#124;H" in row
    assert len(re.findall(r"(?<!\\)\|", row)) == 8  # 7 cells: no pipe leaked from the text
    assert "<b>x</b>" not in outside_code_blocks(out)


def outside_code_blocks(markdown: str) -> str:
    """The Markdown without its fenced code blocks (a fence closes on a line of at least as
    many backticks as it opened with)."""
    kept: list[str] = []
    fence = ""
    for line in markdown.splitlines():
        run = re.match(r"^(`{3,})", line)
        if fence:
            if run and len(run.group(1)) >= len(fence) and not line.strip("`"):
                fence = ""
        elif run:
            fence = run.group(1)
        else:
            kept.append(line)
    return "\n".join(kept)


def test_markdown_details_can_be_turned_off() -> None:
    out = MarkdownReporter().format(make_report(details=False))
    assert "<details>" not in out and "Cancel a booking" in out


def _big_run(n: int, transcript_len: int = 40, reason: str = "judge says no") -> RunResults:
    long = tuple(
        msg(1, "user" if i % 2 else "assistant", f"line {i} " + "blah " * 30)
        for i in range(transcript_len)
    )
    scenarios = []
    for i in range(n):
        status = "failed" if i % 3 == 0 else "passed"
        scenarios.append(
            scenario(
                f"scenario {i:04d}",
                status,
                attempts=(Attempt(status=status, transcript=long, reason=reason),),
            )
        )
    return results_of(*scenarios)


@pytest.mark.parametrize("limit", [65_536 - 1024, 20_000, 3_000, 500, 60, 0])
def test_markdown_never_exceeds_budget(limit: int) -> None:
    report = make_report(_big_run(400), max_chars=limit)
    out = MarkdownReporter().format(report)
    assert len(out) <= limit


def test_markdown_trims_passing_rows_then_transcripts_never_reasons() -> None:
    full = MarkdownReporter().format(make_report(_big_run(6)))
    assert "(last 16 of 40)" in full and full.count("| ✅ |") == 4

    # A little short: passing rows go first; transcripts and every failure stay.
    out = MarkdownReporter().format(make_report(_big_run(6), max_chars=len(full) - 200))
    assert "(last 16 of 40)" in out and "| ✅ |" not in out and out.count("| ❌ |") == 2
    assert (
        "row(s) of passing, skipped or removed scenarios left out to fit; see the [full results]("
        + RUN_URL
        in out
    )

    # Shorter still: transcripts shrink, then go; every failure's reason stays.
    run = _big_run(6, reason="the judge disagreed " * 20)
    out = MarkdownReporter().format(make_report(run, max_chars=len(full) // 3))
    assert "(last 16 of 40)" not in out and out.count("- the judge disagreed") == 2
    assert "scenario 0000**" in out and "scenario 0003**" in out

    # Tiny: reasons are cut to a line, and only then do whole failures go, last first.
    out = MarkdownReporter().format(make_report(_big_run(60), max_chars=2500))
    assert len(out) <= 2500 and "scenario 0000**" in out
    assert "more failures left out to fit; see the [full results](" + RUN_URL in out
    assert "| ✅ |" not in out


def test_markdown_byte_budget_counts_utf8() -> None:
    out = MarkdownReporter().format(make_report(_big_run(200), max_bytes=10_000))
    assert len(out.encode()) <= 10_000
    assert len(out) < 10_000


def test_markdown_one_megabyte_summary_of_a_huge_run() -> None:
    scenarios = [
        scenario(f"s{i}", "failed", reason="the judge disagreed " * 100) for i in range(1500)
    ]
    out = MarkdownReporter().format(make_report(results_of(*scenarios), max_bytes=1024 * 1024))
    assert len(out.encode()) <= 1024 * 1024
    assert "left out to fit" in out


def test_transcript_excerpt_keeps_the_end() -> None:
    s = scenario(
        "long",
        "failed",
        attempts=(
            Attempt(
                status="failed",
                transcript=tuple(msg(1, "user", f"message number {i}") for i in range(30))
                + CANCEL_TRANSCRIPT,
            ),
        ),
    )
    out = MarkdownReporter().format(make_report(results_of(s)))
    assert "message number 29" in out and "message number 0\n" not in out
    assert "Transcript (last 16 of 34)" in out


def test_report_masks_results_it_is_built_from() -> None:
    s = replace(scenario("x", "failed"), reason="token sk-live-abcdef123456 leaked")
    from lkeval.text.masking import register_secret

    register_secret("sk-live-abcdef123456")
    report = build_report(results_of(s), None, evaluate_gate(results_of(s), None))
    assert report.results.scenarios[0].reason == "token *** leaked"
