"""The sticky PR comment: one comment per eval job, edited in place on every run.

A new comment per push buries the conversation (promptfoo's action does that); one live
comment keeps the PR readable. The comment is found by a hidden marker,
``<!-- lk-eval:{comment_id} -->``, at the start of its body; ``comment_id`` lets several eval
jobs of one PR keep a comment each. Finding it means listing *all* of the PR's comments,
page by page: on a busy PR the marker is on page 3.

Posting never raises and never changes the gate: a fork PR's read-only token (403 "Resource not
accessible by integration"), a 5xx or a timeout becomes a ``::warning::`` and the job goes on.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from lkeval.publish.github.api import GitHubApi, GitHubError

MAX_COMMENT_CHARS = 65_536
CommentMode = Literal["update", "new", "off"]
COMMENT_MODES: tuple[CommentMode, ...] = ("update", "new", "off")
COMMENT_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,99}$")

FORK_HINT = (
    "a pull request from a fork gets a read-only token; post the comment from a "
    "workflow_run workflow instead (see examples/workflows/eval-comment.yml), or grant "
    "`permissions: pull-requests: write`"
)


@dataclass(frozen=True)
class CommentResult:
    """What happened to the comment: created, updated, skipped or failed (with a warning)."""

    action: Literal["created", "updated", "skipped", "failed"]
    url: str | None = None
    comment_id: int | None = None
    warning: str | None = None


def marker(comment_id: str) -> str:
    """The hidden HTML marker that identifies this job's comment."""
    if not COMMENT_ID_PATTERN.match(comment_id) or "--" in comment_id:
        raise ValueError(
            f"comment id {comment_id!r}: use letters, digits, '.', '_', ':', '/', single '-'"
        )
    return f"<!-- lk-eval:{comment_id} -->"


def comment_body(comment_id: str, markdown: str) -> str:
    """The full comment body: the marker line then the report, cut to the size limit."""
    body = f"{marker(comment_id)}\n{markdown}"
    return body if len(body) <= MAX_COMMENT_CHARS else body[:MAX_COMMENT_CHARS]


def find_comment(api: GitHubApi, repository: str, pr_number: int, comment_id: str) -> Any:
    """The first comment whose body starts with this job's marker, or None.

    ``startswith`` rather than ``in``: a reply quoting the comment (``> <!-- ...``) must not
    be mistaken for it.
    """
    tag = marker(comment_id)
    path = f"/repos/{repository}/issues/{pr_number}/comments"
    for comment in api.paginate(path, {"per_page": 100}):
        body = comment.get("body") if isinstance(comment, dict) else None
        if isinstance(body, str) and body.lstrip().startswith(tag):
            return comment
    return None


def post_sticky_comment(
    api: GitHubApi,
    repository: str,
    pr_number: int,
    markdown: str,
    *,
    comment_id: str = "default",
    mode: CommentMode = "update",
    warn: Callable[[str], None] | None = None,
) -> CommentResult:
    """Create or update this job's comment on a PR; report failures through ``warn``."""
    if mode == "off":
        return CommentResult("skipped")
    body = comment_body(comment_id, markdown)
    try:
        existing = (
            find_comment(api, repository, pr_number, comment_id) if mode == "update" else None
        )
        existing_id = existing.get("id") if isinstance(existing, dict) else None
        if existing_id is not None:
            response = api.request(
                "PATCH", f"/repos/{repository}/issues/comments/{existing_id}", json={"body": body}
            )
            action: Literal["created", "updated"] = "updated"
        else:
            response = api.request(
                "POST", f"/repos/{repository}/issues/{pr_number}/comments", json={"body": body}
            )
            action = "created"
    except Exception as exc:
        message = f"lk-eval could not post the PR comment: {exc}"
        if isinstance(exc, GitHubError) and exc.status == 403:
            message += f" ({FORK_HINT})"
        elif not isinstance(exc, GitHubError):
            message = f"lk-eval could not post the PR comment: {type(exc).__name__}: {exc}"
        if warn is not None:
            warn(message)
        return CommentResult("failed", warning=message)
    data = _json(response)
    url = data.get("html_url") if isinstance(data.get("html_url"), str) else None
    number = data.get("id") if isinstance(data.get("id"), int) else None
    return CommentResult(action, url=url, comment_id=number)


def _json(response: Any) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
