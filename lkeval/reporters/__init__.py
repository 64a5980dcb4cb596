"""Reporters: pure renderers of a :class:`Report` (JUnit XML, Markdown).

``REPORTER_BY_NAME`` is the one registry: each entry is a ``--<name> PATH`` flag of ``lkeval
run`` and ``lkeval report`` (:mod:`lkeval.cli.flags`) and the tests loop over it, so a new
format is one module plus one entry here. (The results JSON is not a reporter: it is the data
every reporter reads, written by :func:`lkeval.results.model.dump_results`.)
"""

from __future__ import annotations

from lkeval.reporters.interface import Report, Reporter, build_report
from lkeval.reporters.junit import JUnitReporter
from lkeval.reporters.markdown import MarkdownReporter

REPORTER_BY_NAME: dict[str, type[Reporter]] = {
    JUnitReporter.name: JUnitReporter,
    MarkdownReporter.name: MarkdownReporter,
}

__all__ = [
    "REPORTER_BY_NAME",
    "JUnitReporter",
    "MarkdownReporter",
    "Report",
    "Reporter",
    "build_report",
]
