"""What every reporter receives and promises.

A reporter is a tiny class with one pure method, ``format(report) -> str``: writing files,
streams or HTTP stays with the caller (:mod:`lkeval.publish`), so a reporter is tested by
comparing its whole output with a golden file.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from lkeval.results.baseline import Comparison
from lkeval.results.gate import GateOutcome
from lkeval.results.model import RunResults
from lkeval.text.masking import mask_results


@dataclass(frozen=True)
class Report:
    """Everything a reporter renders: the results, the baseline comparison, the gate, options.

    ``max_chars``/``max_bytes`` are hard budgets (a PR comment holds 65,536 characters, a job
    summary 1 MiB); a reporter that supports them trims and never exceeds them. ``run_url``
    is where the full results live (the workflow run with its artifacts), named whenever
    something had to be left out.
    """

    results: RunResults
    comparison: Comparison | None
    gate: GateOutcome
    max_chars: int | None = None
    max_bytes: int | None = None
    details: bool = True
    run_url: str | None = None
    title: str = "lk-eval"
    repo_root: str | None = None
    """The repository's root, that file paths in reports are relative to (None: as recorded)."""
    files_from: str | None = None
    """The folder the Markdown file is written to: an audio call's WAV and SVG are linked
    relative to it (:mod:`lkeval.reporters.call_links`)."""
    artifacts_url: str | None = None
    """The run's artifacts page (validated, from the environment only), that a PR comment or
    job summary links a call's files to, as GitHub cannot link a file on the runner."""
    artifacts_root: str | None = None
    """The folder the recipes upload (the results file's): a call's files are named by their
    path inside it."""


def build_report(
    results: RunResults,
    comparison: Comparison | None,
    gate: GateOutcome,
    *,
    max_chars: int | None = None,
    max_bytes: int | None = None,
    details: bool = True,
    run_url: str | None = None,
    title: str = "lk-eval",
) -> Report:
    """A :class:`Report` of data masked here (with the process's one masker), for callers
    that have not masked it yet.

    ``lkeval run``/``report`` mask the results once when they enter and build the
    :class:`Report` directly; this is for tests and library use.
    """
    return Report(
        results=mask_results(results),
        comparison=mask_results(comparison),
        gate=mask_results(gate),
        max_chars=max_chars,
        max_bytes=max_bytes,
        details=details,
        run_url=run_url,
        title=title,
    )


class Reporter(ABC):
    """Renders a :class:`Report` as one string. Pure: no files, no streams, no network."""

    #: The name used on the command line and in :data:`lkeval.reporters.REPORTER_BY_NAME`.
    name: ClassVar[str]
    #: What it writes, for the ``--<name> PATH`` flag's help ("JUnit XML").
    description: ClassVar[str]
    #: How the ``reports:`` line at the end of a run names its file ("JUnit").
    label: ClassVar[str]

    @abstractmethod
    def format(self, report: Report) -> str:
        """The rendered report, masked (:func:`lkeval.text.masking.mask`)."""
