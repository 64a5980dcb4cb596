"""The report, baseline, budget and gate flags ``lkeval run`` and ``lkeval report`` share,
and the pull-request comment's and GitHub's. Defaults come from
:class:`lkeval.cli.options.ReportOptions`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from lkeval import defaults
from lkeval.cli import options as opt
from lkeval.cli.options import ReportOptions
from lkeval.publish.github.comments import COMMENT_MODES
from lkeval.reporters import REPORTER_BY_NAME
from lkeval.results.gate import FAIL_ON_CHOICES
from lkeval.results.history import MAX_WINDOW as MAX_HISTORY_RUNS


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """The report and merge-gate flags shared by ``lkeval run`` and ``lkeval report``."""
    group = parser.add_argument_group("reports, baseline and gate")
    parser.set_defaults(report_files={})
    for name, reporter in REPORTER_BY_NAME.items():
        group.add_argument(
            f"--{name}",
            dest="report_files",
            action=_ReportFile,
            const=name,
            metavar="PATH",
            help=f"write {reporter.description} here",
        )
    _add_baseline(group)
    _add_gate(group)
    _add_budgets(parser.add_argument_group("latency and cost budgets"))
    _add_gate_allowances(group)
    _add_comment(parser.add_argument_group("pull-request comment"))
    _add_github(parser.add_argument_group("GitHub"))


def _add_baseline(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--baseline",
        metavar="PATH|github:BRANCH",
        help="results to compare against: a file of an earlier run, or github:BRANCH for the "
        "results artifact of BRANCH's latest finished run of this workflow (github: alone: "
        "the default branch; needs a token with actions: read); none found is a note, not a "
        "failure",
    )
    group.add_argument(
        "--baseline-artifact",
        metavar="NAME",
        default=defaults.BASELINE_ARTIFACT,
        help="with --baseline github:BRANCH: the name the results were uploaded under "
        f"(default: {defaults.BASELINE_ARTIFACT})",
    )
    group.add_argument(
        "--history-runs",
        type=opt.positive_int_up_to(MAX_HISTORY_RUNS),
        default=ReportOptions.history_runs,
        metavar="N",
        help="with --baseline: judge failures against each scenario's pass rate over the last "
        f"N runs the baseline's history holds (default %(default)s, at most {MAX_HISTORY_RUNS})",
    )


def _add_gate(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--fail-on",
        choices=FAIL_ON_CHOICES,
        default=ReportOptions.fail_on,
        help="what fails the gate: any failure (default), only failures the baseline did not "
        "have (regressed, new, or no verdict there), or never",
    )
    group.add_argument(
        "--catch",
        type=opt.parse_catch,
        metavar="BROKEN:CHANCE",
        help="the sequential test's sensitivity: catch a scenario broken in BROKEN of its "
        "conversations at least CHANCE of the time, e.g. 50%%:90%% (default 90%%:99%%; "
        "`lkeval validate --catch ...` prints what it costs; see docs/sampling.md)",
    )
    group.add_argument(
        "--min-pass-rate",
        type=opt.parse_pass_rate,
        metavar="RATE",
        help="also fail when the pass rate (non-quarantined, non-skipped scenarios) is below "
        "RATE: 0.9 or 90%%",
    )


def _add_gate_allowances(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--allow-nothing-to-check",
        action="store_true",
        help="do not fail the gate on scenarios with nothing to check (no expectations, no "
        "judged agent_expectations, no judges); they are never played either way",
    )
    group.add_argument(
        "--allow-all-quarantined",
        action="store_true",
        help="pass a run in which every scenario that ran is quarantined (by default a gate "
        "that counted no scenario fails)",
    )


def _add_budgets(group: argparse._ArgumentGroup) -> None:
    """``--max-latency``, ``--max-cost``, ``--latency-regression``, ``--cost-regression``."""
    group.add_argument(
        "--max-latency",
        type=opt.latency_budget,
        metavar="STAT=DURATION",
        help="fail when the suite's turn latency is over budget: p50|p95|max|ttft_p50|"
        "ttft_p95|ttft_max|first_audio.p50|first_audio.p95|first_audio.max (audio), e.g. "
        "p95=1.5s or p95=1200ms,ttft_p95=600ms "
        "(per scenario: latency: in the YAML)",
    )
    group.add_argument(
        "--max-cost",
        type=opt.usd,
        metavar="USD",
        help="fail when the run's estimated cost (agent + caller + judge) is over USD; "
        "unpriced models make it uncheckable, which fails too (see --price)",
    )
    group.add_argument(
        "--latency-regression",
        type=opt.percent,
        metavar="PERCENT",
        help="with --baseline: fail when p95 turn latency (suite or a scenario) grew by more "
        "than PERCENT, e.g. 20%%; noisy deltas (few turns, within the spread) never fail",
    )
    group.add_argument(
        "--cost-regression",
        type=opt.percent,
        metavar="PERCENT",
        help="with --baseline: fail when the run's cost grew by more than PERCENT, e.g. 25%%",
    )


class _ReportFile(argparse.Action):
    """``--<reporter> PATH``: collects {reporter name: path} in one ``report_files`` dict."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        files = dict(getattr(namespace, self.dest) or {})
        files[self.const] = values
        setattr(namespace, self.dest, files)


def _add_comment(group: argparse._ArgumentGroup) -> None:
    """``--comment``, ``--comment-id``, ``--title``, ``--comment-author``."""
    group.add_argument(
        "--comment",
        choices=COMMENT_MODES,
        default=ReportOptions.comment,
        help="PR comment: update one sticky comment (default), post a new one, or off",
    )
    group.add_argument(
        "--comment-id",
        type=opt.parse_comment_id,
        default=ReportOptions.comment_id,
        metavar="ID",
        help="keeps one sticky comment per ID, for several eval jobs on one PR; its heading "
        "names the ID",
    )
    group.add_argument(
        "--title",
        metavar="TEXT",
        help="the reports' heading (default: lk-eval, plus the comment ID when not default)",
    )
    group.add_argument(
        "--comment-author",
        metavar="LOGIN",
        help="who the token posts as, when it cannot say (a GitHub App's token: "
        "SLUG[bot]); only its comment with the marker is updated",
    )


def _add_github(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--github",
        action=argparse.BooleanOptionalAction,
        help="GitHub Actions output: annotations, summary, outputs, comment "
        "(default: on when GITHUB_ACTIONS=true)",
    )
    group.add_argument(
        "--github-token",
        metavar="TOKEN",
        help="token for the PR comment (default: $GITHUB_TOKEN)",
    )
    group.add_argument(
        "--summary",
        action=argparse.BooleanOptionalAction,
        help="append the report to $GITHUB_STEP_SUMMARY (default: on with --github)",
    )
    group.add_argument(
        "--pr",
        type=int,
        metavar="NUMBER",
        help="PR to comment on when the event does not say (workflow_run from a fork)",
    )


__all__ = ["add_report_arguments"]
