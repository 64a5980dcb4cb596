"""JUnit XML, the format every CI test-report viewer reads.

Shaped for the consumers users actually run (dorny/test-reporter, mikepenz/action-junit-report,
EnricoMi/publish-unit-test-result-action): one ``testsuite`` per scenario group, one
``testcase`` per scenario with ``classname`` = group, ``name`` = label, ``file``/``line`` = where
the scenario is written (mikepenz and EnricoMi annotate the file with them, so ``file`` is
relative to the repository's root, not to the working directory), ``time``; a
one-line ``message`` on failure/error/skipped (the only text most viewers show) and the full
story in the element text and ``system-out`` (the transcript, which EnricoMi shows).

A quarantined scenario is reported ``skipped`` with ``quarantined: failed (...)``: a viewer that
counts failures must not count it, yet the reader still sees what happened.

The output validates against Jenkins' junit-10.xsd (with ``file``/``line`` on ``testcase``).
junit-xml builds the elements; the root and the serialisation are ours so that the output is
deterministic and carries no attribute that schema does not know (``disabled``).
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable

from junit_xml import TestCase, TestSuite

from lkeval.reporters.interface import Report, Reporter
from lkeval.results.baseline import ScenarioChange
from lkeval.results.calibration import describe_calibration
from lkeval.results.model import RunResults, ScenarioResult
from lkeval.results.wording import (
    attempt_to_show,
    failure_reasons,
    format_transcript,
    outcome_line,
    plain,
    ran_attempts,
    replay_text,
    scenario_state,
)
from lkeval.text.masking import mask
from lkeval.text.untrusted import label

#: How many log lines of a crashed agent go into an ``error`` element.
LOG_TAIL_LINES = 40

# What XML 1.0 cannot carry besides C0 controls (which plain() removes): surrogates, FFFE/FFFF.
_ILLEGAL_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """Text safe for an XML document: ANSI colours and illegal characters removed."""
    return _ILLEGAL_XML.sub("", plain(text))


def repo_path(path: str, root: str | None) -> str:
    """``path`` (relative to the working directory) relative to ``root``, when inside it.

    Annotators resolve ``testcase@file`` against the repository's root: with
    ``working-directory: agent``, ``evals/s.yaml`` must become ``agent/evals/s.yaml``.
    """
    if not path or root is None:
        return path
    try:
        relative = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    except ValueError:  # another drive
        return path
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return path
    return relative.replace(os.sep, "/")


class JUnitReporter(Reporter):
    """Renders results as a JUnit XML document.

    ``root`` (else ``report.repo_root``) is the repository's root (the caller finds it:
    ``GITHUB_WORKSPACE``, else the folder holding ``.git``); scenario files are written
    relative to it. Without one they stay as the results name them.
    """

    name = "junit"
    description = "JUnit XML"
    label = "JUnit"

    def __init__(self, root: str | None = None) -> None:
        self.root = root

    def format(self, report: Report) -> str:
        """The JUnit XML document (UTF-8 declaration, two-space indent, trailing newline)."""
        results = report.results
        repo = self.root if self.root is not None else report.repo_root
        root = ET.Element("testsuites", {"name": xml_text(report.title)})
        totals = {"tests": 0, "failures": 0, "errors": 0}
        total_time = 0.0
        properties = {**_run_properties(results), **_conditions(results)}
        for name, scenarios in _groups(results):
            suite = TestSuite(
                xml_text(name),
                [_testcase(s, repo) for s in scenarios],
                timestamp=xml_text(results.metadata.started_at) or None,
                file=xml_text(repo_path(scenarios[0].file, repo)) or None,
                properties=properties or None,
            )
            element = suite.build_xml_doc()
            element.attrib.pop("disabled", None)
            suite_time = sum(s.duration_seconds for s in scenarios)
            element.set("time", f"{suite_time:.3f}")
            for case_element, scenario in zip(element.iter("testcase"), scenarios, strict=True):
                case_element.set("time", f"{scenario.duration_seconds:.3f}")
                _add_properties(case_element, scenario, _change(report, scenario))
            for key in totals:
                totals[key] += int(element.get(key, "0"))
            total_time += suite_time
            root.append(element)
        for key, value in totals.items():
            root.set(key, str(value))
        root.set("time", f"{total_time:.3f}")
        ET.indent(root, space="  ")
        body = ET.tostring(root, encoding="unicode")
        return mask('<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n")


def _run_properties(results: RunResults) -> dict[str, str]:
    """What every suite of the run carries: the judge preflight's warning, when it had one
    (a judge that passed the known-bad canary must not look like a trusted one anywhere)."""
    check = results.metadata.judge_check
    if check is None or not check.warning:
        return {}
    return {"lkeval.judge-check": xml_text(" ".join(check.warning.split()))}


def _conditions(results: RunResults) -> dict[str, str]:
    """Under which conditions latency was measured, as suite properties (when recorded)."""
    meta = results.metadata
    recorded = {
        "lkeval.conversation_mode": meta.conversation_mode,
        "lkeval.inference_class": meta.inference_class,
    }
    return {name: xml_text(value) for name, value in recorded.items() if value}


def _groups(results: RunResults) -> Iterable[tuple[str, list[ScenarioResult]]]:
    """Scenarios by group (group id, else name and file), in the order groups first appear."""
    groups: dict[tuple[str, str], list[ScenarioResult]] = {}
    names: dict[tuple[str, str], str] = {}
    for scenario in results.scenarios:
        key = (scenario.group_id or scenario.group_name, scenario.file)
        groups.setdefault(key, []).append(scenario)
        names.setdefault(key, scenario.group_name or scenario.file or "scenarios")
    return [(names[key], members) for key, members in groups.items()]


def _testcase(scenario: ScenarioResult, root: str | None) -> TestCase:
    case = TestCase(
        xml_text(label(scenario.label)),  # bounded: a huge label must not swamp the report
        classname=xml_text(label(scenario.group_name or scenario.file)),
        elapsed_sec=scenario.duration_seconds,
        stdout=xml_text(_system_out(scenario)) or None,
        file=xml_text(repo_path(scenario.file, root)) or None,
        line=str(scenario.line) if scenario.line else None,
    )
    message = xml_text(outcome_line(scenario))
    reasons = xml_text("\n".join(failure_reasons(scenario)))
    if scenario.status == "skipped":
        case.add_skipped_info(message=f"skipped: {message}" if scenario.reason else "skipped")
    elif scenario.quarantined:
        detail = "" if scenario.status == "passed" else f" ({message})"
        case.add_skipped_info(
            message=f"quarantined: {scenario.status}{detail}", output=reasons or None
        )
    elif scenario.status == "failed":
        case.add_failure_info(message=message, output=reasons or message, failure_type="failure")
    elif scenario.status == "error":
        case.add_error_info(
            message=message, output=xml_text(_error_text(scenario)), error_type="error"
        )
    return case


def _change(report: Report, scenario: ScenarioResult) -> ScenarioChange | None:
    comparison = report.comparison
    return comparison.change_for(scenario.scenario_id) if comparison is not None else None


def _add_properties(
    case: ET.Element, scenario: ScenarioResult, change: ScenarioChange | None = None
) -> None:
    """The scenario's attempts and how its verdict was reached, and its pass rate over the
    baseline's history, as testcase properties (first child, as consumers of pytest's
    ``record_property`` read them)."""
    values: dict[str, str] = {}
    sampling = scenario.sampling
    if sampling is not None:
        values = {
            "attempts": str(sampling.attempts),
            "passes": str(sampling.passes),
            "judge_votes": str(sampling.judge_votes),
            "sampling": sampling.mode,
            "decision": sampling.text,
        }
        if sampling.confidence is not None:
            values["confidence"] = f"{sampling.confidence:.6f}"
    if change is not None and change.history is not None:
        values["history_rate"] = f"{change.history.rate:.4f}"
        values["history"] = change.history.text
        if change.history_verdict is not None:
            values["history_test"] = change.history_verdict.text
    if change is not None and change.calibration is not None:
        values["judge_calibration"] = describe_calibration(change.calibration)
    values |= _replay_properties(scenario)
    if not values:
        return
    properties = ET.Element("properties")
    for name, value in values.items():
        ET.SubElement(properties, "property", {"name": name, "value": xml_text(value)})
    case.insert(0, properties)


def _replay_properties(scenario: ScenarioResult) -> dict[str, str]:
    """With ``--cassettes``: replayed, live or missed, the one-line why, and the calls."""
    state = scenario_state(scenario)
    if state is None:
        return {}
    records = [a.replay for a in ran_attempts(scenario) if a.replay is not None]
    saved = [r.saved_usd for r in records if r.saved_usd is not None]
    values = {
        "replay": state,
        "replay_detail": replay_text(scenario),
        "calls_replayed": str(sum(r.calls_replayed for r in records)),
        "calls_live": str(sum(r.calls_live for r in records)),
    }
    if saved:
        values["saved_usd"] = f"{sum(saved):.6f}"
    return values


def _error_text(scenario: ScenarioResult) -> str:
    lines = failure_reasons(scenario)
    attempt = attempt_to_show(scenario)
    if attempt is not None and attempt.log_tail:
        where = f" of {attempt.log_path}" if attempt.log_path else ""
        lines.append(f"last {min(len(attempt.log_tail), LOG_TAIL_LINES)} log lines{where}:")
        lines.extend(attempt.log_tail[-LOG_TAIL_LINES:])
    elif attempt is not None and attempt.log_path:
        lines.append(f"agent log: {attempt.log_path}")
    return "\n".join(lines) or scenario.status


def _system_out(scenario: ScenarioResult) -> str:
    """Every attempt's transcript, headed by its number and outcome when repeated."""
    attempts = ran_attempts(scenario)
    blocks: list[str] = []
    for number, attempt in enumerate(attempts, start=1):
        lines: list[str] = []
        if len(attempts) > 1:
            lines.append(f"--- attempt {number}/{len(attempts)}: {attempt.status} ---")
        if attempt.end_reason:
            lines.append(f"(ended: {attempt.end_reason})")
        lines.extend(format_transcript(attempt.transcript))
        blocks.append("\n".join(lines))
    return "\n\n".join(b for b in blocks if b)
