"""After a run: compare with the baseline, decide the gate, write reports, tell GitHub.

Shared by ``lkeval run`` (right after the run) and ``lkeval report`` (from a results file
alone, e.g. in the fork-safe ``workflow_run`` recipe), so both take the same flags from
:func:`add_report_arguments` and behave the same.

Two rules shape it. The gate alone decides the exit code: GitHub being unreachable, a fork's
read-only token or a missing PR are warnings, never failures. And nothing leaves the process
unmasked: the results are masked once up front, and every line, file and request body is
masked again on the way out.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from lkeval.publish.budget_flags import (
    add_budget_arguments,
    budget_annotations,
    budgets_from_args,
    metric_outputs,
)
from lkeval.publish.github.api import GitHubApi, GitHubError
from lkeval.publish.github.checkout import repo_root
from lkeval.publish.github.comments import (
    COMMENT_MODES,
    MAX_COMMENT_CHARS,
    CommentMode,
    comment_title,
    marker,
    post_sticky_comment,
)
from lkeval.publish.github.context import (
    GitHubContext,
    commit_shown,
    find_pull_request,
    read_context,
)
from lkeval.publish.github.workflow import (
    MAX_ERROR_ANNOTATIONS,
    add_mask_commands,
    append_step_summary,
    error_annotations,
    inert_line,
    summary_budget,
    warning,
    write_outputs,
)
from lkeval.reporters import JUnitReporter, MarkdownReporter, Report, build_report
from lkeval.results.baseline import Comparison, compare
from lkeval.results.gate import EXIT_NOTHING_RAN, FAIL_ON_CHOICES, GateOutcome, evaluate_gate, tally
from lkeval.results.masking import Masker, process_masker, register_secret
from lkeval.results.model import ResultsFileError, RunResults, load_results

#: Room kept free below GitHub's hard limits, for the marker line and a later edit by hand.
COMMENT_MARGIN = 1024
SUMMARY_MARGIN = 4096


class PublishError(Exception):
    """Bad input to publishing; the CLI maps it to exit code 2."""


class BaselineError(PublishError, ResultsFileError):
    """The baseline results file cannot be used (also a ResultsFileError: exit 2 either way)."""


class OutputError(PublishError, OSError):
    """A report file cannot be written (also an OSError with ``filename``: exit 2 either way)."""


def parse_pass_rate(value: str) -> float:
    """``0.9`` or ``90%`` → 0.9 (argparse type); anything else is a usage error."""
    text = value.strip()
    try:
        rate = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r}: give a fraction 0..1 or a percentage like 90%"
        ) from None
    if not 0.0 <= rate <= 1.0:
        raise argparse.ArgumentTypeError(
            f"{value!r}: give a fraction 0..1 or a percentage like 90% (0%..100%)"
        )
    return rate


def parse_comment_id(value: str) -> str:
    """A comment id that makes a valid hidden marker (argparse type)."""
    try:
        marker(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """The report and merge-gate flags shared by ``lkeval run`` and ``lkeval report``."""
    group = parser.add_argument_group("reports and merge gate")
    group.add_argument("--junit", metavar="PATH", help="write JUnit XML here")
    group.add_argument("--markdown", metavar="PATH", help="write the Markdown report here")
    group.add_argument(
        "--baseline", metavar="PATH", help="results file of an earlier run to compare against"
    )
    group.add_argument(
        "--fail-on",
        choices=FAIL_ON_CHOICES,
        default="any",
        help="what fails the gate: any failure (default), only regressions vs the baseline, "
        "or never",
    )
    group.add_argument(
        "--min-pass-rate",
        type=parse_pass_rate,
        metavar="RATE",
        help="also fail when the pass rate (non-quarantined, non-skipped scenarios) is below "
        "RATE: 0.9 or 90%%",
    )
    add_budget_arguments(group)
    group.add_argument(
        "--allow-nothing-to-check",
        action="store_true",
        help="do not fail the gate on scenarios with nothing to check (no expectations, no "
        "judged agent_expectations, no judges); they are never played either way",
    )
    group.add_argument(
        "--comment",
        choices=COMMENT_MODES,
        default="update",
        help="PR comment: update one sticky comment (default), post a new one, or off",
    )
    group.add_argument(
        "--comment-id",
        type=parse_comment_id,
        default="default",
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
    group.add_argument(
        "--github",
        action=argparse.BooleanOptionalAction,
        default=None,
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
        default=None,
        help="append the report to $GITHUB_STEP_SUMMARY (default: on with --github)",
    )
    group.add_argument(
        "--pr",
        type=int,
        metavar="NUMBER",
        help="PR to comment on when the event does not say (workflow_run from a fork)",
    )


def publish(
    results: RunResults, results_path: str | None, args: argparse.Namespace, stream: TextIO
) -> GateOutcome:
    """Compare, gate, write reports and GitHub output; return the gate (exit code inside)."""
    env = os.environ
    token = getattr(args, "github_token", None) or env.get("GITHUB_TOKEN") or None
    register_secret(token)
    masker = process_masker()
    github = getattr(args, "github", None)
    if github is None:
        github = env.get("GITHUB_ACTIONS") == "true"

    def emit(line: str) -> None:
        stream.write(masker.mask(line) + "\n")

    if github:
        for line in add_mask_commands(masker):
            stream.write(line + "\n")  # consumed by the runner, never shown

    safe = masker.mask_results(results)
    comparison = _comparison(safe, getattr(args, "baseline", None), masker)
    gate = evaluate_gate(
        safe,
        comparison,
        getattr(args, "fail_on", "any"),
        getattr(args, "min_pass_rate", None),
        budgets_from_args(args),
        allow_nothing_to_check=bool(getattr(args, "allow_nothing_to_check", False)),
    )
    ctx = read_context(env, token=token, pr_number=getattr(args, "pr", None)) if github else None
    run_url = ctx.run_url if ctx else None
    if ctx is not None:
        sha = commit_shown(ctx, safe.metadata.git_sha)
        safe = dataclasses.replace(safe, metadata=dataclasses.replace(safe.metadata, git_sha=sha))
    title = comment_title(getattr(args, "comment_id", "default"), getattr(args, "title", None))

    def report(
        max_chars: int | None = None, max_bytes: int | None = None, details: bool = True
    ) -> Report:
        return build_report(
            safe,
            comparison,
            gate,
            masker=masker,
            run_url=run_url,
            max_chars=max_chars,
            max_bytes=max_bytes,
            details=details,
            title=title,
        )

    junit_path = getattr(args, "junit", None)
    markdown_path = getattr(args, "markdown", None)
    if junit_path:
        root = repo_root(env)  # annotators resolve testcase@file from the repository's root
        _write(junit_path, JUnitReporter(root=str(root) if root else None).format(report()))
    if markdown_path:
        _write(markdown_path, MarkdownReporter().format(report()))
    # Where every report went, so nobody has to guess (results and logs: ``lkeval run``).
    written = [f"JUnit {junit_path}"] if junit_path else []
    written += [f"Markdown {markdown_path}"] if markdown_path else []

    if ctx is not None:
        annotations, omitted = error_annotations(safe, ctx.workspace)
        for line in annotations + budget_annotations(gate, ctx.workspace):
            emit(line)
        comment_url = _comment(ctx, args, report, masker, emit)
        summary = getattr(args, "summary", None)
        if ctx.step_summary and summary is not False:
            _summary(ctx.step_summary, report, omitted, emit)
            written.append("job summary")
        written += [f"PR comment {comment_url}"] if comment_url else []
        if ctx.output:
            outputs = _outputs(safe, comparison, gate, results_path, junit_path, comment_url)
            try:
                write_outputs(ctx.output, {k: masker.mask(v) for k, v in outputs.items()})
            except OSError as exc:
                emit(warning(f"lk-eval could not write $GITHUB_OUTPUT: {exc.strerror}"))

    if written:
        emit("reports: " + " · ".join(written))
    emit(gate_line(gate))
    return gate


def gate_line(gate: GateOutcome) -> str:
    """The one line that ends every run: the verdict and why."""
    if gate.passed:
        state = "passed"
    elif gate.exit_code == EXIT_NOTHING_RAN:
        state = "NOTHING RAN (exit 3)"
    else:
        state = f"FAILED (exit {gate.exit_code})"
    why = "; ".join(gate.reasons)
    # Reasons name scenarios by label, which a PR can set: one inert line, never a command.
    return inert_line(f"lk-eval gate: {state}" + (f" — {why}" if why else ""), 4000)


def load_baseline(path: str) -> RunResults:
    """The baseline results file, or :class:`BaselineError` (exit 2); ``run`` calls it before
    the first agent boots, so a typo in the path costs seconds, not a suite."""
    try:
        return load_results(path)
    except ResultsFileError as exc:
        raise BaselineError(f"baseline: {exc}") from None


def _comparison(results: RunResults, path: str | None, masker: Masker) -> Comparison | None:
    if not path:
        return None
    return compare(results, masker.mask_results(load_baseline(path)))


def _write(path: str, text: str) -> None:
    try:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OutputError(exc.errno, f"cannot write: {exc.strerror or exc}", path) from None


def _comment(
    ctx: GitHubContext,
    args: argparse.Namespace,
    report: Callable[..., Report],
    masker: Masker,
    emit: Callable[[str], None],
) -> str | None:
    """Post or update the sticky comment; any problem is a warning. Returns the comment URL."""
    mode: CommentMode = getattr(args, "comment", "update")
    comment_id = getattr(args, "comment_id", "default")
    if mode == "off":
        return None
    if not ctx.repository:
        emit(warning("lk-eval: GITHUB_REPOSITORY is not set; no PR comment"))
        return None
    if not ctx.token:
        emit(warning("lk-eval: no GitHub token (GITHUB_TOKEN or --github-token); no PR comment"))
        return None
    try:
        with GitHubApi(ctx.api_url, ctx.token, masker=masker) as api:
            number = ctx.pr_number
            if number is None and ctx.event_name == "push" and ctx.head_sha:
                try:
                    number = find_pull_request(api, ctx.repository, ctx.head_sha)
                except GitHubError as exc:
                    emit(warning(f"lk-eval could not find the PR of {ctx.head_sha}: {exc}"))
                    return None
            if number is None:
                emit("lk-eval: not a pull request; no PR comment")
                return None
            budget = MAX_COMMENT_CHARS - len(marker(comment_id)) - 1 - COMMENT_MARGIN
            markdown = MarkdownReporter().format(report(max_chars=budget))
            result = post_sticky_comment(
                api,
                ctx.repository,
                number,
                markdown,
                comment_id=comment_id,
                mode=mode,
                warn=lambda message: emit(warning(message)),
                compact=lambda: MarkdownReporter().format(report(max_chars=budget, details=False)),
                author=getattr(args, "comment_author", None),
            )
    except Exception as exc:
        emit(warning(f"lk-eval could not post the PR comment: {type(exc).__name__}: {exc}"))
        return None
    if result.url:
        emit(f"lk-eval: PR comment {result.action}: {result.url}")
    return result.url


def _summary(
    path: str, report: Callable[..., Report], omitted: int, emit: Callable[[str], None]
) -> None:
    note = ""
    if omitted:
        note = (
            f"\n_{omitted} more failing scenario(s) have no annotation: GitHub shows at most "
            f"{MAX_ERROR_ANNOTATIONS} error annotations per step._\n"
        )
    budget = max(0, summary_budget(path) - len(note.encode()) - SUMMARY_MARGIN)
    try:
        append_step_summary(path, MarkdownReporter().format(report(max_bytes=budget)) + note)
    except OSError as exc:
        emit(warning(f"lk-eval could not write the job summary: {exc.strerror}"))


def _outputs(
    results: RunResults,
    comparison: Comparison | None,
    gate: GateOutcome,
    results_path: str | None,
    junit_path: str | None,
    comment_url: str | None,
) -> dict[str, str]:
    t = tally(results)
    rate = t.pass_rate
    return {
        "gate": "pass" if gate.passed else "fail",
        "exit-code": str(gate.exit_code),
        "total": str(t.total),
        "passed": str(t.passed),
        "failed": str(t.failed),
        "errored": str(t.errored),
        "skipped": str(t.skipped),
        "quarantined": str(t.quarantined),
        "pass-rate": "" if rate is None else format(round(rate, 4), "g"),
        "regressions": str(len(comparison.regressions)) if comparison else "0",
        "results-path": results_path or "",
        "junit-path": junit_path or "",
        "comment-url": comment_url or "",
        "reasons": "\n".join(inert_line(reason) for reason in gate.reasons),
        **metric_outputs(results, comparison, gate),
    }


def report_main(args: argparse.Namespace) -> int:
    """``lkeval report``: publish a results file as if the run had just ended."""
    try:
        results = load_results(args.results)
        gate = publish(results, args.results, args, sys.stdout)
    except (ResultsFileError, PublishError) as exc:
        message = f"{exc.filename}: {exc.strerror}" if isinstance(exc, OSError) else str(exc)
        print(f"lkeval report: error: {message}", file=sys.stderr)
        return 2
    return gate.exit_code


def add_report_command(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Register ``lkeval report --results FILE ...``; its handler is ``args.handler``."""
    parser = subparsers.add_parser(
        "report",
        help="report and gate from a results file (no agent needed)",
        description="Write reports, post the PR comment and decide the merge gate from a "
        "results file of an earlier run; exit 0 passed, 1 failed, 2 bad input, 3 nothing ran.",
    )
    parser.add_argument("--results", required=True, metavar="PATH", help="results.json to read")
    add_report_arguments(parser)
    parser.set_defaults(handler=report_main)
    return parser
