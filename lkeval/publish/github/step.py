"""What one Actions step shows of a finished run: annotations, the PR comment, the job summary
and the step outputs.

The gate is already decided (by the command) and the report already built and masked; this
module only sends them out, masked with the process's one masker
(:mod:`lkeval.text.masking`). Everything here is best effort: GitHub being unreachable, a fork's
read-only token or a missing PR are warnings, never a change to the verdict.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from lkeval.publish.github.api import GitHubApi, GitHubError
from lkeval.publish.github.budgets import budget_annotations, metric_outputs
from lkeval.publish.github.comments import (
    MAX_COMMENT_CHARS,
    CommentMode,
    marker,
    post_sticky_comment,
)
from lkeval.publish.github.context import GitHubContext, find_pull_request
from lkeval.publish.github.workflow import (
    MAX_ERROR_ANNOTATIONS,
    append_step_summary,
    error_annotations,
    summary_budget,
    write_outputs,
)
from lkeval.reporters import MarkdownReporter, Report
from lkeval.results.gate import tally
from lkeval.results.wording import plain
from lkeval.text.masking import mask
from lkeval.text.untrusted import command, inert_line, warning

#: Room kept free below GitHub's hard limits, for the marker line and a later edit by hand.
COMMENT_MARGIN = 1024
SUMMARY_MARGIN = 4096

Emit = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class StepSettings:
    """How this step reports: the comment mode and id, the summary, the paths to output."""

    comment: CommentMode = "update"
    comment_id: str = "default"
    comment_author: str | None = None
    summary: bool = True
    results_path: str | None = None
    junit_path: str | None = None


def publish_step(
    report: Report, ctx: GitHubContext, settings: StepSettings, emit: Emit
) -> list[str]:
    """Annotations, then the comment, the summary and the outputs, each best effort.

    Returns what was published, for the run's ``reports:`` line."""
    written: list[str] = []
    annotations, omitted = error_annotations(report.results, ctx.workspace)
    for line in annotations + budget_annotations(report.gate, ctx.workspace):
        emit(line)
    if check_warning := judge_check_warning(report):
        emit(command("warning", mask(check_warning), title="lk-eval: judge preflight"))
    comment_url = post_comment(report, ctx, settings, emit)
    if ctx.step_summary and settings.summary:
        write_summary(ctx.step_summary, report, omitted, emit)
        written.append("job summary")
    written += [f"PR comment {comment_url}"] if comment_url else []
    if ctx.output:
        outputs = step_outputs(report, settings, comment_url)
        try:
            write_outputs(ctx.output, {k: mask(v) for k, v in outputs.items()})
        except OSError as exc:
            emit(warning(f"lk-eval could not write $GITHUB_OUTPUT: {exc.strerror}"))
    return written


def post_comment(
    report: Report, ctx: GitHubContext, settings: StepSettings, emit: Emit
) -> str | None:
    """Post or update the sticky comment; any problem is a warning. Returns the comment URL."""
    if settings.comment == "off":
        return None
    if not ctx.repository:
        emit(warning("lk-eval: GITHUB_REPOSITORY is not set; no PR comment"))
        return None
    if not ctx.token:
        emit(warning("lk-eval: no GitHub token (GITHUB_TOKEN or --github-token); no PR comment"))
        return None
    try:
        with GitHubApi(ctx.api_url, ctx.token) as api:
            number = _pull_request(api, ctx, emit)
            if number is None:
                return None
            budget = MAX_COMMENT_CHARS - len(marker(settings.comment_id)) - 1 - COMMENT_MARGIN
            fitted = dataclasses.replace(report, max_chars=budget)
            compact = dataclasses.replace(fitted, details=False)
            result = post_sticky_comment(
                api,
                ctx.repository,
                number,
                mask(MarkdownReporter().format(fitted)),
                comment_id=settings.comment_id,
                mode=settings.comment,
                warn=lambda message: emit(warning(message)),
                compact=lambda: mask(MarkdownReporter().format(compact)),
                author=settings.comment_author,
            )
    except Exception as exc:  # best effort: never the verdict
        emit(warning(f"lk-eval could not post the PR comment: {type(exc).__name__}: {exc}"))
        return None
    if result.url:
        emit(f"lk-eval: PR comment {result.action}: {result.url}")
    return result.url


def _pull_request(api: GitHubApi, ctx: GitHubContext, emit: Emit) -> int | None:
    number = ctx.pr_number
    if number is None and ctx.event_name == "push" and ctx.head_sha and ctx.repository:
        try:
            number = find_pull_request(api, ctx.repository, ctx.head_sha)
        except GitHubError as exc:
            emit(warning(f"lk-eval could not find the PR of {ctx.head_sha}: {exc}"))
            return None
    if number is None:
        emit("lk-eval: not a pull request; no PR comment")
    return number


def write_summary(path: str, report: Report, omitted: int, emit: Emit) -> None:
    """Append the report to the job summary, within what is left of its 1 MiB."""
    note = ""
    if omitted:
        note = (
            f"\n_{omitted} more failing scenario(s) have no annotation: GitHub shows at most "
            f"{MAX_ERROR_ANNOTATIONS} error annotations per step._\n"
        )
    budget = max(0, summary_budget(path) - len(note.encode()) - SUMMARY_MARGIN)
    markdown = MarkdownReporter().format(dataclasses.replace(report, max_bytes=budget))
    try:
        append_step_summary(path, mask(markdown) + note)
    except OSError as exc:
        emit(warning(f"lk-eval could not write the job summary: {exc.strerror}"))


def step_outputs(report: Report, settings: StepSettings, comment_url: str | None) -> dict[str, str]:
    """The step's outputs (documented in action.yml)."""
    t = tally(report.results)
    rate = t.pass_rate
    gate, comparison = report.gate, report.comparison
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
        "results-path": settings.results_path or "",
        "junit-path": settings.junit_path or "",
        "comment-url": comment_url or "",
        "reasons": "\n".join(inert_line(reason) for reason in gate.reasons),
        "judge-check": judge_check_output(report),
        **metric_outputs(report.results, comparison, gate),
    }


def judge_check_warning(report: Report) -> str:
    """The judge preflight's warning as one plain line ("" when it had none)."""
    check = report.results.metadata.judge_check
    return plain(" ".join(check.warning.split())) if check is not None else ""


def judge_check_output(report: Report) -> str:
    """``judge-check``: empty when no judge ran, ``ok`` when it told the canaries apart, else
    the preflight's warning (a judge that failed its canary, or one unsure of the good one)."""
    if report.results.metadata.judge_check is None:
        return ""
    return judge_check_warning(report) or "ok"
