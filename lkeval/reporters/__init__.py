"""Reporters: pure renderers of a :class:`Report` (JUnit XML, JSON, Markdown).

``REPORTER_BY_NAME`` is the one registry: the CLI's choices and the tests loop over it, so a
new format is one module plus one entry here.
"""

from __future__ import annotations

from lkeval.reporters.interface import Report, Reporter, build_report
from lkeval.reporters.json_report import JsonReporter
from lkeval.reporters.junit import JUnitReporter
from lkeval.reporters.markdown import MarkdownReporter

REPORTER_BY_NAME: dict[str, type[Reporter]] = {
    JUnitReporter.name: JUnitReporter,
    JsonReporter.name: JsonReporter,
    MarkdownReporter.name: MarkdownReporter,
}

__all__ = [
    "REPORTER_BY_NAME",
    "JUnitReporter",
    "JsonReporter",
    "MarkdownReporter",
    "Report",
    "Reporter",
    "build_report",
]
