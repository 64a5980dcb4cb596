"""What GitHub Actions tells a step about where it runs: repository, event, PR, files.

Read once from the environment (and the event payload file) into a frozen
:class:`GitHubContext`, so the rest of lk-eval never touches ``os.environ`` for GitHub facts
and tests can build a context by hand.

Which PR a run belongs to depends on the event:

* ``pull_request`` / ``pull_request_target``: the payload's ``pull_request.number``. Note
  that ``GITHUB_SHA`` is then the *merge* commit; the head commit is in the payload.
* ``workflow_run`` (the fork-safe comment recipe): the payload's ``workflow_run`` names the
  evaluated run and its head sha; its ``pull_requests`` list is empty for PRs from forks, which
  is why the recipe carries the PR number in an artifact and passes ``--pr``.
* ``push``: no PR in the payload; :func:`find_pull_request` asks the API which PR holds the
  commit (``GET /repos/{o}/{r}/commits/{sha}/pulls``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lkeval.publish.github.api import GitHubApi, GitHubError, json_of

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_SERVER_URL = "https://github.com"
PR_EVENTS = ("pull_request", "pull_request_target")
#: What a server URL, a repository and a run id may be before a link is built from them (the
#: environment is GitHub's, but a link into a comment must not depend on that).
_SERVER_URL = re.compile(r"https://[A-Za-z0-9.-]{1,253}(?::[0-9]{1,5})?")
_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")
_RUN_ID = re.compile(r"[0-9]{1,20}")


@dataclass(frozen=True)
class GitHubContext:
    """The facts of one Actions step that lk-eval uses."""

    actions: bool = False
    api_url: str = DEFAULT_API_URL
    server_url: str = DEFAULT_SERVER_URL
    repository: str | None = None
    event_name: str | None = None
    sha: str | None = None
    head_sha: str | None = None
    pr_number: int | None = None
    run_id: str | None = None
    run_attempt: str | None = None
    evaluated_run_url: str | None = None
    step_summary: str | None = None
    output: str | None = None
    workspace: str | None = None
    token: str | None = None
    #: A pull request from another repository (a fork): GitHub gives its runs no secrets.
    fork: bool = False

    @property
    def run_url(self) -> str | None:
        """The page of the evaluated workflow run (its artifacts hold the full results): the
        payload's run in the ``workflow_run`` recipe, else this one. Reports link it, so it is
        None unless the server URL, the repository and the run id are what GitHub sets."""
        if not _SERVER_URL.fullmatch(self.server_url):
            return None
        if self.evaluated_run_url is not None:
            path = self.evaluated_run_url.removeprefix(self.server_url + "/")
            repository, _, run_id = path.partition("/actions/runs/")
        else:
            repository, run_id = self.repository or "", self.run_id or ""
        if not (_REPOSITORY.fullmatch(repository) and _RUN_ID.fullmatch(run_id)):
            return None
        if any(part in (".", "..") for part in repository.split("/")):
            return None
        return f"{self.server_url}/{repository}/actions/runs/{run_id}"

    @property
    def artifacts_url(self) -> str | None:
        """The artifacts section of :attr:`run_url`'s page (where a call's files are)."""
        return f"{self.run_url}#artifacts" if self.run_url else None

    def __repr__(self) -> str:  # never show the token, not even in a traceback
        return (
            f"GitHubContext(repository={self.repository!r}, event_name={self.event_name!r}, "
            f"pr_number={self.pr_number!r}, token={'***' if self.token else None})"
        )


def read_context(
    environ: Mapping[str, str] | None = None,
    *,
    token: str | None = None,
    pr_number: int | None = None,
) -> GitHubContext:
    """The context from the Actions environment; ``token``/``pr_number`` override it."""
    env = os.environ if environ is None else environ
    event_name = env.get("GITHUB_EVENT_NAME") or None
    payload = _payload(env.get("GITHUB_EVENT_PATH"))
    sha = env.get("GITHUB_SHA") or None
    head_sha = sha
    number: int | None = None
    evaluated_run_url: str | None = None
    fork = False

    pull = payload.get("pull_request")
    if event_name in PR_EVENTS and isinstance(pull, dict):
        number = _int(pull.get("number")) or _int(payload.get("number"))
        head = pull.get("head")
        if isinstance(head, dict) and isinstance(head.get("sha"), str):
            head_sha = head["sha"]
        fork = _from_fork(pull)
    elif event_name == "workflow_run" and isinstance(payload.get("workflow_run"), dict):
        run = payload["workflow_run"]
        if isinstance(run.get("head_sha"), str):
            head_sha = run["head_sha"]
        if isinstance(run.get("html_url"), str):
            evaluated_run_url = run["html_url"]
        pulls = run.get("pull_requests")
        if isinstance(pulls, list) and pulls and isinstance(pulls[0], dict):
            number = _int(pulls[0].get("number"))

    return GitHubContext(
        actions=env.get("GITHUB_ACTIONS") == "true",
        api_url=(env.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/"),
        server_url=(env.get("GITHUB_SERVER_URL") or DEFAULT_SERVER_URL).rstrip("/"),
        repository=env.get("GITHUB_REPOSITORY") or None,
        event_name=event_name,
        sha=sha,
        head_sha=head_sha,
        pr_number=pr_number if pr_number is not None else number,
        run_id=env.get("GITHUB_RUN_ID") or None,
        run_attempt=env.get("GITHUB_RUN_ATTEMPT") or None,
        evaluated_run_url=evaluated_run_url,
        step_summary=env.get("GITHUB_STEP_SUMMARY") or None,
        output=env.get("GITHUB_OUTPUT") or None,
        workspace=env.get("GITHUB_WORKSPACE") or None,
        token=token or env.get("GITHUB_TOKEN") or None,
        fork=fork,
    )


def commit_shown(ctx: GitHubContext, recorded: str | None) -> str | None:
    """The commit a report names: the PR's head, never the merge commit GitHub built.

    On a PR event (and in the ``workflow_run`` recipe) the payload's head sha is what the
    reviewer pushed; ``GITHUB_SHA`` and a checkout's ``HEAD`` are a merge commit nobody saw.
    Elsewhere the recorded sha stands, then ``GITHUB_SHA``.
    """
    from_payload = ctx.event_name in (*PR_EVENTS, "workflow_run") and ctx.head_sha
    if from_payload and ctx.head_sha != ctx.sha:
        return ctx.head_sha
    return recorded or ctx.head_sha or ctx.sha


def find_pull_request(api: GitHubApi, repository: str, sha: str) -> int | None:
    """The PR a commit belongs to (an open one first), for runs triggered by ``push``.

    Raises :class:`GitHubError`; the caller decides whether that is worth a warning.
    """
    pulls = json_of(api.request("GET", f"/repos/{repository}/commits/{sha}/pulls"))
    if not isinstance(pulls, list):
        raise GitHubError(f"GET /repos/{repository}/commits/{sha}/pulls: expected a list")
    candidates = [p for p in pulls if isinstance(p, dict)]
    candidates.sort(key=lambda p: p.get("state") != "open")
    for pull in candidates:
        number = _int(pull.get("number"))
        if number is not None:
            return number
    return None


def _from_fork(pull: dict[str, Any]) -> bool:
    """Whether a PR's head lives in another repository than its base (a deleted fork too)."""
    head, base = pull.get("head"), pull.get("base")
    head_repo = head.get("repo") if isinstance(head, dict) else None
    base_repo = base.get("repo") if isinstance(base, dict) else None
    if not isinstance(head_repo, dict):
        return isinstance(head, dict) and "repo" in head  # `"repo": null`: the fork is gone
    if isinstance(base_repo, dict) and base_repo.get("full_name"):
        return bool(head_repo.get("full_name") != base_repo.get("full_name"))
    return head_repo.get("fork") is True  # no base in the payload: the repo's own word


def _payload(path: str | None) -> dict[str, Any]:
    """The event payload, or {} when absent or unreadable (then there is just no PR)."""
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None
