"""Reporters: pure renderers of a :class:`Report` (JUnit XML, Markdown).

``REPORTER_BY_NAME`` is the one registry: each entry is a ``--<name> PATH`` flag of ``lkeval
run`` and ``lkeval report`` (:mod:`lkeval.cli.flags`, with the reporter's ``description`` as its
help), its file is checked for writability before anything boots, written masked, and named by
its ``label`` on the ``reports:`` line; the tests loop over it. So a new format is one module (a
:class:`Reporter` subclass) plus one entry here; ``tests/reporters/test_reporters.py`` proves it
with a format it registers on the fly. (Offering it as an Action input too is a separate choice:
``action.yml`` and :mod:`lkeval_action.inputs`.) (The results JSON is not a reporter: it is the data
every reporter reads, written by :func:`lkeval.results.results_json.dump_results`.)
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
