"""The sequential decision in the reports: JUnit properties (schema-valid), the Markdown runs
column and the progress/JUnit message carry "passed 3 of 3 — ..."."""

from __future__ import annotations

from dataclasses import replace

import xmlschema
from conftest import TEST_DATA
from junitparser import JUnitXml
from report_fixtures import FAILED, PASSED, assert_golden, metadata

from lkeval.reporters import JUnitReporter, MarkdownReporter, build_report
from lkeval.results.gate import evaluate_gate
from lkeval.results.model import Attempt, RunResults, Verdict
from lkeval.results.sampling import SequentialRule, describe, observe
from lkeval.results.wording import outcome_line

XSD = TEST_DATA / "junit.xsd"


def _sequential(result, votes: list[str]):  # type: ignore[no-untyped-def]
    attempts = tuple(
        replace(result.attempts[0], status="passed" if v == "pass" else "failed",
                verdicts=(Verdict("judge", v, f"said {v}"),))  # type: ignore[arg-type]
        for v in votes
    )  # fmt: skip
    seen = [o for a in attempts if (o := observe(a)) is not None]
    sampling = describe(SequentialRule(), seen)
    return replace(result, attempts=attempts, sampling=sampling, status=sampling.outcome)


def test_the_decision_reaches_junit_markdown_and_the_message() -> None:
    passed = _sequential(PASSED, ["pass"] * 3)
    failed = _sequential(FAILED, ["fail"] * 5)
    results = RunResults(metadata(sampling_rule={"max_attempts": 20}), (passed, failed))
    report = build_report(results, None, evaluate_gate(results, None))
    xml = JUnitReporter().format(report)
    xmlschema.XMLSchema(str(XSD)).validate(xml)
    assert '<property name="attempts" value="3" />' in xml
    assert '<property name="decision" value="passed 3 of 3 — pass rate above 0.18' in xml
    cases = [case for suite in JUnitXml.fromstring(xml) for case in suite]
    assert len(cases) == 2  # one testcase per scenario, whatever its attempts
    assert outcome_line(failed).startswith(
        "failed 0 of 5 — pass rate below 0.86 at 99.985% on its own attempts"
    )
    markdown = MarkdownReporter().format(report)
    assert "3/3 (passed)" in markdown and "0/5 (failed)" in markdown
    assert "<sub>sampling: 8 attempts for 2 scenarios (6 more than one each)" in markdown


def test_an_attempt_with_a_veto_is_definite_not_a_judge_vote() -> None:
    veto = Attempt(
        status="failed",
        verdicts=(Verdict("judge", "pass"), Verdict("agent", "fail", "vetoed")),
    )
    assert observe(veto) is not None and observe(veto).definite == "fail"  # type: ignore[union-attr]
    assert observe(Attempt(status="error")).definite == "fail"  # type: ignore[union-attr]
    assert observe(Attempt(status="skipped")) is None


def test_each_decision_states_its_own_confidence_and_the_headline_the_gates_sensitivity() -> None:
    """Issue 33.7, golden: a pass at the boundary, a pass of 11 of 20 at the cap (78% on its
    own attempts, not the test's 99.16%) and a failure; the Markdown headline says what the
    gate lets through (30% / 50% / 70% / 90%-broken scenarios) beside the false-block rate."""
    boundary = _sequential(PASSED, ["pass"] * 3)
    capped = _sequential(replace(PASSED, scenario_id="SCN_capped", label="Capped"),
                         ["pass", "fail"] * 9 + ["pass", "pass"])  # fmt: skip
    failed = _sequential(FAILED, ["fail"] * 5)
    results = RunResults(metadata(sampling_rule={"max_attempts": 20}), (boundary, capped, failed))
    report = build_report(results, None, evaluate_gate(results, None))
    xml = JUnitReporter().format(report)
    markdown = MarkdownReporter().format(report)
    assert '<property name="confidence" value="0.784' in xml
    assert "passed 11 of 20 — pass rate above 0.18 at 78% on its own attempts" in xml
    assert (
        "sensitivity: a scenario broken in 30% / 50% / 70% / 90% of its conversations passes "
        "90% / 44% / 9% / 0.84% (sequential test) of the time" in markdown
    )
    assert_golden("report-sequential.xml", xml)
    assert_golden("markdown-sequential.md", markdown)
