"""``lkeval report``, and the end of ``lkeval run``: compare, decide the gate, publish.

The gate is decided here, in the command, from results that were masked once; publishing
(:mod:`lkeval.publish`) then only writes what it is given. ``run`` calls :func:`finish` right
after its run and ``report`` calls it on a results file alone (the fork-safe ``workflow_run``
recipe), so both behave the same. The gate alone decides the exit code, except that a report
that could not be written is exit 2 (after every other output was written).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TextIO

from lkeval.cli.flags import add_report_arguments
from lkeval.cli.options import ReportOptions, report_options, sensitivity_rule
from lkeval.llm.canaries import KNOWN_FAILS
from lkeval.publish.files import ResultsDirLock, check_writable, write_all, write_text
from lkeval.publish.github.checkout import repo_root
from lkeval.publish.github.comments import comment_title
from lkeval.publish.github.context import GitHubContext, commit_shown, read_context
from lkeval.publish.github.remote_baseline import FetchedBaseline, fetch_baseline, is_remote
from lkeval.publish.github.step import StepSettings, publish_step
from lkeval.reporters import REPORTER_BY_NAME, Report
from lkeval.results.baseline import Comparison, compare, same_run
from lkeval.results.calibration import calibrated_errors, calibrations, unfit_passes
from lkeval.results.consistency import status_problem
from lkeval.results.controls import KnownBad, suite_controls
from lkeval.results.gate import GateOutcome, evaluate_gate, gate_line
from lkeval.results.history import DEFAULT_WINDOW as DEFAULT_HISTORY_RUNS
from lkeval.results.history import digests, rolled, with_history
from lkeval.results.model import Calibration, RunResults
from lkeval.results.results_json import ResultsFileError, dump_results, load_results
from lkeval.results.sampling import recheck, recorded_rule, run_cost_line
from lkeval.results.sensitivity import sensitivity_line
from lkeval.scenarios.model import Scenario
from lkeval.text.masking import mask, mask_results
from lkeval.text.untrusted import inert_line, one_line


class BaselineError(ResultsFileError):
    """The baseline results file cannot be used (exit 2)."""


def load_baseline(path: str) -> RunResults:
    """The baseline results file, or :class:`BaselineError` (exit 2); ``run`` calls it before
    the first agent boots, so a typo in the path costs seconds, not a suite."""
    try:
        return load_results(path)
    except ResultsFileError as exc:
        raise BaselineError(f"baseline: {exc}") from None


def resolve_baseline(options: ReportOptions) -> FetchedBaseline | None:
    """The baseline asked for (None: none was): a file, or ``github:BRANCH`` fetched.

    A fetched baseline that is not there is a :class:`FetchedBaseline` saying why (the gate
    notes it and goes on); a file that cannot be read, or a fetched one that is corrupt, raises
    (exit 2). ``run`` calls this before the first agent boots and hands the answer to
    :func:`finish`, so the download happens once and a broken baseline costs seconds.
    """
    spec = options.baseline
    if not spec:
        return None
    if is_remote(spec):
        return fetch_baseline(spec, artifact=options.baseline_artifact, token=options.github_token)
    return FetchedBaseline(load_baseline(spec), source=spec)


def load_comparison(
    results: RunResults,
    baseline: FetchedBaseline | None,
    history_runs: int = DEFAULT_HISTORY_RUNS,
) -> Comparison | None:
    """Compare with the baseline's results, when there are some, and with the pass-rate
    history they carry (never with the history ``results`` carries itself: a pull request's
    run could have written that one)."""
    if baseline is None or baseline.results is None:
        return None
    comparison = compare(results, mask_results(baseline.results), history_runs)
    return dataclasses.replace(
        comparison, baseline_source=baseline.source, baseline_url=baseline.url
    )


def check_not_itself(
    results: RunResults, baseline: FetchedBaseline | None, results_path: str | None = None
) -> None:
    """Refuse (exit 2) a baseline that is the results file it gates, or records the same run:
    compared with itself a run has no regression, and its own history would excuse it."""
    if baseline is None or baseline.results is None:
        return
    spec = baseline.source
    if results_path and spec and not is_remote(spec) and _same_file(spec, results_path):
        raise BaselineError(f"baseline: {spec} is the results file it gates ({results_path})")
    problem = same_run(results, baseline.results)
    if problem:
        raise BaselineError(f"baseline: {spec or 'the baseline'}: {problem}")


def _same_file(first: str, second: str) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:
        return False


def baseline_line(baseline: FetchedBaseline | None) -> str:
    """``baseline: main run #12 (commit …, success) URL`` or ``no baseline: <why>``."""
    if baseline is None:
        return ""
    if baseline.results is None:
        return f"no baseline: {baseline.missing}"
    return f"baseline: {baseline.source}" + (f" {baseline.url}" if baseline.url else "")


def baseline_judge_errors(
    results: RunResults, baseline: RunResults | None, history_runs: int
) -> dict[str, float]:
    """Scenario id -> the judge error its calibration in ``baseline``'s history sets, for the
    scenarios of ``results`` whose content it was measured on."""
    if baseline is None:
        return {}
    calibrated = calibrated_errors(rolled(baseline, history_runs), digests(results))
    return {sid: error for sid, (_, error) in calibrated.items()}


def printed_gate_line(gate: GateOutcome) -> str:
    """The gate line as printed: reasons name scenarios by label, which a PR can set, so it is
    one bounded, inert line, never a workflow command."""
    return inert_line(gate_line(gate), 4000)


def decide(
    results: RunResults,
    options: ReportOptions,
    baseline: FetchedBaseline | None,
    results_path: str | None = None,
) -> tuple[Report, GitHubContext | None]:
    """Compare with the baseline, decide the gate, and build the one :class:`Report`.

    The results must already be masked; in Actions the report shows the PR's head commit
    (not the merge commit ``GITHUB_SHA``) and links the run, and its audio calls by their path
    inside ``results_path``'s folder (the one the recipes upload).
    """
    baseline_results = (
        mask_results(baseline.results) if baseline is not None and baseline.results else None
    )
    # A sequential pass must follow from its recorded attempts, under the judge errors the
    # baseline's calibration sets (never the ones the results file records for itself).
    errors = baseline_judge_errors(results, baseline_results, options.history_runs)
    rule = sensitivity_rule(options.catch, recorded_rule(results).max_attempts)
    results = recheck(results, errors, rule)
    if results.metadata.sampling_rule:  # the reports' figures are the gate's rule's
        meta = dataclasses.replace(results.metadata, sampling_rule=dataclasses.asdict(rule))
        results = dataclasses.replace(results, metadata=meta)
    if baseline_results is not None:  # a judge its calibration calls unfit passes nothing
        results = unfit_passes(results, rolled(baseline_results, options.history_runs))
    comparison = load_comparison(results, baseline, options.history_runs)
    gate = evaluate_gate(
        results,
        comparison,
        options.fail_on,
        options.min_pass_rate,
        options.budgets,
        allow_nothing_to_check=options.allow_nothing_to_check,
        allow_all_quarantined=options.allow_all_quarantined,
        no_baseline=baseline.missing if baseline is not None else None,
    )
    ctx = read_context(token=options.github_token, pr_number=options.pr) if options.github else None
    if ctx is not None:
        sha = commit_shown(ctx, results.metadata.git_sha)
        results = dataclasses.replace(
            results, metadata=dataclasses.replace(results.metadata, git_sha=sha)
        )
    report = Report(
        results,
        comparison,
        gate,
        run_url=ctx.run_url if ctx else None,
        artifacts_url=ctx.artifacts_url if ctx else None,
        artifacts_root=str(Path(results_path).parent) if results_path else None,
        title=comment_title(options.comment_id, options.title),
        repo_root=str(root) if (root := repo_root()) else None,
    )
    return report, ctx


def for_file(report: Report, name: str, path: str) -> Report:
    """The report as the file at ``path`` shows it: the Markdown file links a call's WAV and
    SVG relative to its own folder (it travels with them), not to the run's artifacts page."""
    if name != "markdown":
        return report
    return dataclasses.replace(report, files_from=str(Path(path).parent), artifacts_url=None)


def finish(
    results: RunResults,
    results_path: str | None,
    options: ReportOptions,
    stream: TextIO,
    baseline: FetchedBaseline | None = None,
) -> GateOutcome:
    """Gate the (masked) results, write the reports and GitHub output, print the gate line.

    ``baseline``: what :func:`resolve_baseline` answered (``run`` resolved it before the first
    boot); resolved here when not given. Raises the first
    :class:`~lkeval.errors.OutputError` after everything else was written.
    """

    def emit(line: str) -> None:
        stream.write(mask(line) + "\n")

    if baseline is None:
        baseline = resolve_baseline(options)
    check_not_itself(results, baseline)
    if baseline is not None:
        emit(inert_line(baseline_line(baseline), 2000))
    report, ctx = decide(results, options, baseline, results_path)
    # The small file CI reads first (JUnit) before the others: on a disk that fills up as
    # they are written, the one a test-report step needs is the one that made it.
    ordered = sorted(options.files, key=lambda f: f[0] != "junit")
    files = [
        (path, REPORTER_BY_NAME[name]().format(for_file(report, name, path)))
        for name, path in ordered
    ]
    failures = write_all(files)
    # Where every report went, so nobody has to guess (results and logs: ``lkeval run``).
    failed = {f.path for f in failures}
    written = [f"{REPORTER_BY_NAME[n].label} {p}" for n, p in options.files if p not in failed]
    if ctx is not None:
        settings = StepSettings(
            comment=options.comment,
            comment_id=options.comment_id,
            comment_author=options.comment_author,
            summary=options.summary,
            results_path=results_path,
            junit_path=options.file("junit"),
        )
        written += publish_step(report, ctx, settings, emit)
    if written:
        emit(one_line("reports: " + " · ".join(written)))  # paths from inputs
    cost = run_cost_line(report.results)  # with the rule the gate decided with
    if cost:
        emit(cost)
        emit(sensitivity_line(report.results))
    emit(printed_gate_line(gate := report.gate))
    stream.flush()
    for failure in failures[1:]:  # every file that could not be written is named
        print(one_line(f"lk-eval: {failure}"), file=sys.stderr)
    if failures:
        raise failures[0]
    return gate


@dataclasses.dataclass(frozen=True)
class RunWriters:
    """``lkeval run``'s outputs (the suite's ``Writers``): the results file (atomic, 0644),
    then the reports and the gate through :func:`finish`, with the baseline resolved once."""

    options: ReportOptions
    out: TextIO

    def check_writable(self, paths: Sequence[Path]) -> None:
        check_writable(paths)

    #: The baseline resolved before the first boot (a fetch happens once), for ``finish``.
    baseline: list[FetchedBaseline] = dataclasses.field(default_factory=list)

    def check_baseline(self) -> dict[str, tuple[str, Calibration]]:
        fetched = resolve_baseline(self.options)
        if fetched is not None:
            self.baseline.append(fetched)
        # The judge calibrations of the baseline's history, for the engine's stopping rule and
        # its unfit judges (lkeval.results.calibration); the engine checks each content digest.
        baseline = self._baseline_results()
        if baseline is None:
            return {}
        return calibrations(rolled(baseline, self.options.history_runs), {})

    def lock(self, results_dir: Path) -> AbstractContextManager[object]:
        return ResultsDirLock(results_dir)

    def known_bad_controls(
        self, scenarios: Sequence[Scenario], calibrated: Mapping[str, tuple[str, Calibration]]
    ) -> tuple[KnownBad, ...]:
        baseline = self._baseline_results()
        if baseline is None or not calibrated:
            return ()
        return suite_controls(baseline, scenarios, calibrated, len(KNOWN_FAILS))

    def write_results(self, path: Path, results: RunResults) -> None:
        # The history this run is compared with, carried on so that the next run taking this
        # file as its baseline continues it (lkeval.results.history).
        baseline = self._baseline_results()
        write_text(path, dump_results(with_history(results, baseline, self.options.history_runs)))

    def _baseline_results(self) -> RunResults | None:
        """The baseline's results as resolved before the first boot (a fetched one is not
        fetched again); a file not read yet (a signal before then) is read now, if it can be."""
        if self.baseline:
            fetched = self.baseline[0].results
            return mask_results(fetched) if fetched is not None else None
        spec = self.options.baseline
        if not spec or is_remote(spec):
            return None
        try:
            return mask_results(load_baseline(spec))
        except BaselineError:  # gone now: the results come first
            return None

    def finish(self, results: RunResults, path: Path, interrupted: bool) -> int:
        report = self.options
        if interrupted:
            # JUnit and Markdown too (an interrupted run is still a complete report), but no
            # GitHub comment or summary: a cancelled job has seconds left, not a network round.
            report = dataclasses.replace(report, github=False)
        baseline = self.baseline[0] if self.baseline else None
        if baseline is None and interrupted and is_remote(report.baseline):
            # Stopped before it was fetched: no network round in a cancelled job's last seconds.
            baseline = FetchedBaseline(None, missing="not fetched (the run was interrupted)")
        return finish(results, str(path), report, self.out, baseline).exit_code


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lkeval report --results FILE ...``."""
    parser = sub.add_parser(
        "report",
        help="report and gate from a results file (no agent needed)",
        description="Write reports, post the PR comment and decide the merge gate from a "
        "results file of an earlier run; exit 0 passed, 1 failed, 2 bad input, 3 nothing ran.",
    )
    parser.add_argument("--results", required=True, metavar="PATH", help="results.json to read")
    add_report_arguments(parser)
    parser.set_defaults(handler=_report_handler)


def report_main(results_path: str, options: ReportOptions, stream: TextIO | None = None) -> int:
    """Publish a results file as if the run had just ended; returns the gate's exit code."""
    out = stream if stream is not None else sys.stdout
    results = mask_results(load_results(results_path))
    problem = status_problem(results)
    if problem:
        raise ResultsFileError(f"{results_path}: {problem}")
    baseline = resolve_baseline(options)
    check_not_itself(results, baseline, results_path)
    return finish(results, results_path, options, out, baseline).exit_code


def _report_handler(args: argparse.Namespace) -> int:
    return report_main(args.results, report_options(args))


__all__ = [
    "BaselineError",
    "RunWriters",
    "add_command",
    "baseline_line",
    "finish",
    "load_comparison",
    "report_main",
    "resolve_baseline",
]
