"""The JSON results file as a reporter: the same bytes ``lkeval run`` keeps as its artifact.

It is the format everything else reads back (``lkeval report``, baselines), so this reporter
adds nothing and drops nothing; it only masks.
"""

from __future__ import annotations

from lkeval.reporters.interface import Report, Reporter
from lkeval.results.model import dump_results


class JsonReporter(Reporter):
    """Renders results as the lk-eval results file (:func:`lkeval.results.model.dump_results`)."""

    name = "json"
    suffix = ".json"

    def format(self, report: Report) -> str:
        """The results file's JSON text."""
        return report.masker.mask(dump_results(report.results))
