"""The sticky PR comment: one comment per eval job, edited in place on every run.

A new comment per push buries the conversation (promptfoo's action does that); one live
comment keeps the PR readable. The comment is found by a hidden marker,
``<!-- lk-eval:{comment_id} -->``, at the start of its body; ``comment_id`` lets several eval
jobs of one PR keep a comment each, and each one's visible heading names it. Finding it means
listing *all* of the PR's comments, page by page: on a busy PR the marker is on page 3.

The marker alone proves nothing: anyone can write it. The comment lk-eval edits is the one
with the marker *and* written by the identity the token acts as (``github-actions[bot]`` for
the workflow's GITHUB_TOKEN, the user of a personal token, or ``--comment-author``); a marker
comment by anyone else is left alone and the run posts its own. Who the token acts as is
decided from what it is (:func:`token_identity`); when GitHub cannot say, nothing is edited
and a new comment is posted, with a warning saying why. Editing someone else's comment
would fail (403) or, worse, put the verdict in a comment its author can rewrite.

Posting never raises and never changes the gate: a fork PR's read-only token (403 "Resource not
accessible by integration"), a 5xx or a timeout becomes a ``::warning::`` and the job goes on.
A 422 (GitHub refused the body) says GitHub's reason and is retried once with the compact
report, so the comment never keeps an old verdict for want of a smaller body.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from lkeval.publish.github.api import GitHubApi, GitHubError, json_of

MAX_COMMENT_CHARS = 65_536
CommentMode = Literal["update", "new", "off"]
COMMENT_MODES: tuple[CommentMode, ...] = ("update", "new", "off")
COMMENT_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,99}$")
DEFAULT_COMMENT_ID = "default"
#: Who the workflow's GITHUB_TOKEN posts as; ``GET /user`` answers an installation token 403.
ACTIONS_BOT = "github-actions[bot]"

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


def comment_title(comment_id: str, title: str | None = None) -> str:
    """The report's visible heading: ``title`` if given, else ``lk-eval``, naming a comment id
    other than the default so two eval jobs' comments can be told apart at a glance."""
    if title:
        return title
    return "lk-eval" if comment_id == DEFAULT_COMMENT_ID else f"lk-eval · {comment_id}"


@dataclass
class TokenIdentity:
    """Who the token posts as, decided once per run (see :func:`token_identity`).

    ``login`` is None when it cannot be known; ``why`` then says what GitHub answered, for the
    warning that the run posted a new comment instead of editing one it could not prove is its
    own.
    """

    login: str | None
    why: str | None = None


def token_identity(api: GitHubApi, author: str | None = None) -> TokenIdentity:
    """The login the token posts as, decided from what the token is, never from a guess.

    In order: ``author`` (``--comment-author``) when given; an installation token (``ghs_``,
    which the workflow's GITHUB_TOKEN is) posts as ``github-actions[bot]``, asked nothing
    (another GitHub App's token posts as ``<slug>[bot]``, which only ``author`` can say); any
    other token is asked ``GET /user``, whose ``login`` it is. GitHub answers an installation
    token 403 there, so a token of unknown form answered 403 is taken as GITHUB_TOKEN too.
    Any other answer (401, 404, 5xx, 403 for a user's token, no login) leaves the identity
    unknown: the caller then edits nothing and posts a new comment, with a warning.
    """
    if author:
        return TokenIdentity(author)
    kind = api.token_kind
    if kind == "installation":
        return TokenIdentity(ACTIONS_BOT)
    try:
        data = json_of(api.request("GET", "/user"))
    except GitHubError as exc:
        if exc.status == 403 and kind == "unknown":
            return TokenIdentity(ACTIONS_BOT)
        return TokenIdentity(None, str(exc))
    login = data.get("login") if isinstance(data, dict) else None
    if not isinstance(login, str) or not login:
        return TokenIdentity(None, "GET /user: no login in the answer")
    return TokenIdentity(login)


def comment_body(comment_id: str, markdown: str) -> str:
    """The full comment body: the marker line then the report, cut to the size limit."""
    body = f"{marker(comment_id)}\n{markdown}"
    return body if len(body) <= MAX_COMMENT_CHARS else body[:MAX_COMMENT_CHARS]


def find_comment(
    api: GitHubApi,
    repository: str,
    pr_number: int,
    comment_id: str,
    author: Callable[[], str | None] | str | None = None,
) -> Any:
    """This job's comment: the first whose body starts with its marker, written by ``author``.

    ``startswith`` rather than ``in``: a reply quoting the comment (``> <!-- ...``) must not
    be mistaken for it. ``author`` is asked only when a marker comment exists (one request
    fewer on a PR's first run); ``None`` accepts any author (only for tests of the marker). An
    ``author`` that answers None (unknown) owns no comment.
    """
    tag = marker(comment_id)
    path = f"/repos/{repository}/issues/{pr_number}/comments"
    login: str | None = None
    asked = False
    for comment in api.paginate(path, {"per_page": 100}):
        body = comment.get("body") if isinstance(comment, dict) else None
        if not (isinstance(body, str) and body.lstrip().startswith(tag)):
            continue
        if author is None:
            return comment
        if not asked:
            login = author() if callable(author) else author
            asked = True
        if login is not None and _login(comment).lower() == login.lower():
            return comment
    return None


def post_sticky_comment(
    api: GitHubApi,
    repository: str,
    pr_number: int,
    markdown: str,
    *,
    comment_id: str = DEFAULT_COMMENT_ID,
    mode: CommentMode = "update",
    warn: Callable[[str], None] | None = None,
    compact: Callable[[], str] | None = None,
    author: str | None = None,
) -> CommentResult:
    """Create or update this job's comment on a PR; report failures through ``warn``.

    ``compact`` renders the smaller report posted instead when GitHub refuses the full one
    (422); ``author`` overrides who the token posts as (see :func:`token_identity`).
    """
    if mode == "off":
        return CommentResult("skipped")
    try:
        existing = None
        identity: list[TokenIdentity] = []
        if mode == "update":

            def who() -> str | None:
                identity.append(token_identity(api, author))
                return identity[0].login

            existing = find_comment(api, repository, pr_number, comment_id, who)
            if identity and identity[0].login is None and warn is not None:
                warn(
                    f"lk-eval cannot tell who the token posts as ({identity[0].why}): "
                    "posted a new comment instead of editing one it cannot prove is its own "
                    "(give --comment-author LOGIN, the action's comment-author input)"
                )
        existing_id = existing.get("id") if isinstance(existing, dict) else None
        action: Literal["created", "updated"] = "updated" if existing_id is not None else "created"
        send = _sender(api, repository, pr_number, existing_id)
        try:
            response = send(comment_body(comment_id, markdown))
        except GitHubError as exc:
            if exc.status != 422 or compact is None:
                raise
            response = send(comment_body(comment_id, compact()))
            if warn is not None:
                warn(f"GitHub refused the full report ({exc}); posted the compact report")
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


def _sender(
    api: GitHubApi, repository: str, pr_number: int, existing_id: Any
) -> Callable[[str], Any]:
    """PATCH the existing comment, or POST a new one."""
    if existing_id is not None:
        path = f"/repos/{repository}/issues/comments/{existing_id}"
        return lambda body: api.request("PATCH", path, json={"body": body})
    path = f"/repos/{repository}/issues/{pr_number}/comments"
    return lambda body: api.request("POST", path, json={"body": body})


def _login(comment: dict[str, Any]) -> str:
    user = comment.get("user")
    login = user.get("login") if isinstance(user, dict) else None
    return login if isinstance(login, str) else ""


def _json(response: Any) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
