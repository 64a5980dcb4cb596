"""Find and fetch a named artifact of the latest finished run on a branch.

The one mechanism behind ``--baseline github:BRANCH`` (the default branch's results file) and
anything else restored from the default branch's runs (cassettes, prior results for a
history): list the repository's artifacts by name (``GET /repos/{o}/{r}/actions/artifacts
?name=``, newest first, paged with ``Link``), keep those of runs on the branch, check each
candidate's run (``GET /actions/runs/{id}``), and download the first that qualifies.

A run qualifies when it is the branch's own (its head repository is this repository, so a
fork's branch that happens to be called ``main`` never does; its event is a push, a schedule
or a manual dispatch, never a pull request), it finished with one of ``conclusions``, it is of
the same workflow file when one is given, it is not the current run, and its artifact has not
expired. Nothing found is an answer with a reason (:class:`Missing`), never an exception: the
callers report it and go on.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lkeval.publish.github.api import GitHubApi, GitHubError, json_of
from lkeval.publish.github.archive import ArchiveError, ArchiveLimits, extract_archive
from lkeval.publish.github.context import GitHubContext, read_context

#: The events whose runs are the branch's own code (a pull request's run is the PR's).
BRANCH_EVENTS = ("push", "schedule", "workflow_dispatch")
#: A run whose gate failed still recorded the branch's truth; a cancelled one may not have.
FINISHED = ("success", "failure")
#: Artifacts looked at (newest first) and candidate runs checked, at most, per search.
MAX_ARTIFACTS = 1000
MAX_RUNS = 20
#: The largest artifact zip downloaded.
MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ArtifactSearch:
    """Which artifact to look for, and which runs may have uploaded it."""

    repository: str
    name: str
    branch: str
    workflow_path: str | None = None
    exclude_run_id: int | None = None
    conclusions: tuple[str, ...] = FINISHED


@dataclass(frozen=True)
class FoundArtifact:
    """An artifact of a qualifying run, and what a report says about where it came from."""

    artifact_id: int
    name: str
    size: int
    download_url: str
    run_id: int
    run_number: int | None
    head_sha: str
    branch: str
    created_at: str
    conclusion: str
    run_url: str | None

    def describe(self) -> str:
        """``main run #12 (commit 0123456789ab, success)``."""
        number = f"#{self.run_number}" if self.run_number is not None else str(self.run_id)
        return f"{self.branch} run {number} (commit {self.head_sha[:12]}, {self.conclusion})"


@dataclass(frozen=True)
class Missing:
    """No artifact: why, in a phrase a report can print after ``no baseline:``."""

    reason: str


def find_artifacts(
    api: GitHubApi, search: ArtifactSearch, limit: int = 1
) -> list[FoundArtifact] | Missing:
    """Up to ``limit`` artifacts of qualifying runs, newest first, or why there is none.

    A refusal by GitHub (no ``actions: read``, a rate limit, the network) is a :class:`Missing`
    naming it; no exception leaves this function.
    """
    try:
        return _search(api, search, limit)
    except GitHubError as exc:
        return Missing(_refusal(exc))


def latest_artifact(api: GitHubApi, search: ArtifactSearch) -> FoundArtifact | Missing:
    """The newest artifact of a qualifying run, or why there is none."""
    found = find_artifacts(api, search, limit=1)
    return found if isinstance(found, Missing) else found[0]


def download_artifact(
    api: GitHubApi, artifact: FoundArtifact, max_bytes: int = MAX_DOWNLOAD_BYTES
) -> bytes:
    """The artifact's zip (raises :class:`GitHubError`: 410 when it expired meanwhile)."""
    if artifact.size > max_bytes:
        raise GitHubError(
            f"artifact {artifact.name!r} of {artifact.describe()} is {artifact.size:,} bytes, "
            f"over the {max_bytes:,} lk-eval downloads",
            413,
        )
    return api.download(artifact.download_url, max_bytes)


def restore_artifact(
    api: GitHubApi,
    search: ArtifactSearch,
    destination: Path,
    limits: ArchiveLimits | None = None,
    max_bytes: int = MAX_DOWNLOAD_BYTES,
) -> FoundArtifact | Missing:
    """The latest qualifying artifact, unpacked under ``destination`` (a directory of files
    such as cassettes): what was restored, or why nothing was.

    A failed download is a :class:`Missing`; an archive that is there but refused (a member
    climbing out, a bomb) raises :class:`~lkeval.publish.github.archive.ArchiveError`, and
    nothing is written then.
    """
    found = latest_artifact(api, search)
    if isinstance(found, Missing):
        return found
    try:
        data = download_artifact(api, found, max_bytes)
    except GitHubError as exc:
        if exc.status == 413:  # there, but over the limit: refused, not missing
            raise ArchiveError(str(exc)) from None
        return Missing(f"the download of {found.describe()} failed: {exc}")
    extract_archive(data, destination, limits)
    return found


@contextmanager
def branch_artifacts(
    branch: str,
    name: str,
    *,
    token: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Iterator[tuple[GitHubApi, ArtifactSearch] | Missing]:
    """An API client and the search for artifact ``name`` of ``branch``'s runs ("" = the
    repository's default branch), from the Actions environment; or why there can be none
    (no repository, no token, an unknown default branch).

    The search is of this run's workflow file (``GITHUB_WORKFLOW_REF``), except under
    ``workflow_run``, whose workflow reports on the evaluated run rather than evaluating, and
    never finds this run itself (``GITHUB_RUN_ID``: a re-run's own upload).
    """
    env = os.environ if environ is None else environ
    ctx = read_context(env, token=token)
    if not ctx.repository:
        yield Missing("GITHUB_REPOSITORY (owner/name) is not set")
        return
    if not ctx.token:
        yield Missing("no GitHub token (set GITHUB_TOKEN or pass --github-token)")
        return
    with GitHubApi(ctx.api_url, ctx.token) as api:
        chosen = branch or _default_branch(api, ctx, env)
        if isinstance(chosen, Missing):
            yield chosen
            return
        yield (
            api,
            ArtifactSearch(
                repository=ctx.repository,
                name=name,
                branch=chosen,
                workflow_path=_workflow_path(ctx, env),
                exclude_run_id=int(ctx.run_id) if ctx.run_id and ctx.run_id.isdigit() else None,
            ),
        )


def _default_branch(api: GitHubApi, ctx: GitHubContext, env: Mapping[str, str]) -> str | Missing:
    """The repository's default branch: from the event payload, else ``GET /repos/{o}/{r}``."""
    from_payload = _payload_default_branch(env.get("GITHUB_EVENT_PATH"))
    if from_payload:
        return from_payload
    try:
        repo = json_of(api.request("GET", f"/repos/{ctx.repository}"))
    except GitHubError as exc:
        return Missing(f"the default branch of {ctx.repository} is unknown: {exc}")
    branch = repo.get("default_branch") if isinstance(repo, dict) else None
    if not isinstance(branch, str) or not branch:
        return Missing(f"the default branch of {ctx.repository} is unknown")
    return branch


def _payload_default_branch(path: str | None) -> str | None:
    if not path:
        return None
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    repo = payload.get("repository") if isinstance(payload, dict) else None
    branch = repo.get("default_branch") if isinstance(repo, dict) else None
    return branch if isinstance(branch, str) and branch else None


def _workflow_path(ctx: GitHubContext, env: Mapping[str, str]) -> str | None:
    """This run's workflow file (``.github/workflows/eval.yml``), from ``GITHUB_WORKFLOW_REF``
    (``owner/repo/.github/workflows/eval.yml@refs/...``); None under ``workflow_run``."""
    ref = env.get("GITHUB_WORKFLOW_REF", "")
    if not ref or ctx.event_name == "workflow_run" or not ctx.repository:
        return None
    path = ref.split("@", 1)[0]
    prefix = f"{ctx.repository}/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def _search(api: GitHubApi, search: ArtifactSearch, limit: int) -> list[FoundArtifact] | Missing:
    found: list[FoundArtifact] = []
    skipped: list[str] = []
    listed = on_branch = checked = 0
    for artifact in _listed(api, search):
        listed += 1
        run = artifact.get("workflow_run") or {}
        if artifact.get("name") != search.name or run.get("head_branch") != search.branch:
            continue
        on_branch += 1
        if artifact.get("expired"):
            skipped.append(f"run {run.get('id')}'s artifact has expired")
            continue
        if checked >= MAX_RUNS:
            break
        checked += 1
        details = json_of(
            api.request("GET", f"/repos/{search.repository}/actions/runs/{run['id']}")
        )
        why = _disqualified(details, search)
        if why:
            skipped.append(why)
            continue
        found.append(_found(artifact, details, search))
        if len(found) >= limit:
            break
    if found:
        return found
    return Missing(_nothing_found(search, listed, on_branch, skipped))


def _listed(api: GitHubApi, search: ArtifactSearch) -> Iterator[dict[str, Any]]:
    """The repository's artifacts named ``search.name``, newest first, at most MAX_ARTIFACTS."""
    items = api.paginate(
        f"/repos/{search.repository}/actions/artifacts",
        {"name": search.name, "per_page": 100},
        key="artifacts",
    )
    for count, item in enumerate(items):
        if count >= MAX_ARTIFACTS:
            return
        if isinstance(item, dict) and isinstance((item.get("workflow_run") or {}).get("id"), int):
            yield item


def _disqualified(run: Any, search: ArtifactSearch) -> str | None:
    """Why a run's artifact may not be used (None: it may)."""
    if not isinstance(run, dict):
        return "a run GitHub did not describe"
    name = f"run #{run.get('run_number')}"
    head_repo = (run.get("head_repository") or {}).get("id")
    own_repo = (run.get("repository") or {}).get("id")
    if head_repo is None or head_repo != own_repo:
        return f"{name} ran another repository's branch (a fork's)"
    if run.get("event") not in BRANCH_EVENTS:
        return f"{name} ran for a {run.get('event')} event, not the branch's own code"
    if search.exclude_run_id is not None and run.get("id") == search.exclude_run_id:
        return f"{name} is this run"
    if run.get("status") != "completed":
        return f"{name} has not finished"
    if run.get("conclusion") not in search.conclusions:
        return f"{name} ended {run.get('conclusion')}"
    if search.workflow_path and run.get("path") != search.workflow_path:
        return f"{name} is of another workflow ({run.get('path')})"
    return None


def _found(artifact: dict[str, Any], run: dict[str, Any], search: ArtifactSearch) -> FoundArtifact:
    number = run.get("run_number")
    return FoundArtifact(
        artifact_id=int(artifact["id"]),
        name=search.name,
        size=int(artifact.get("size_in_bytes") or 0),
        download_url=str(
            artifact.get("archive_download_url")
            or f"/repos/{search.repository}/actions/artifacts/{artifact['id']}/zip"
        ),
        run_id=int(run["id"]),
        run_number=number if isinstance(number, int) else None,
        head_sha=str(run.get("head_sha") or ""),
        branch=search.branch,
        created_at=str(artifact.get("created_at") or ""),
        conclusion=str(run.get("conclusion") or ""),
        run_url=run.get("html_url") if isinstance(run.get("html_url"), str) else None,
    )


def _nothing_found(search: ArtifactSearch, listed: int, on_branch: int, skipped: list[str]) -> str:
    what = f"artifact {search.name!r}"
    if not listed:
        return (
            f"no {what} in {search.repository} yet (the first run, or none kept: "
            "artifacts expire after the retention days)"
        )
    if not on_branch:
        return f"no {what} from a run on branch {search.branch!r} ({listed} from other branches)"
    newest = f"; the newest: {skipped[0]}" if skipped else ""
    return f"none of the {on_branch} runs on {search.branch!r} with an {what} qualifies{newest}"


def _refusal(exc: GitHubError) -> str:
    """A GitHub refusal as the reason there is no artifact."""
    if exc.rate_limited:
        return f"GitHub's API rate limit: {exc}"
    if exc.status == 403:
        return f"GitHub refused ({exc}); the job needs `permissions: actions: read`"
    if exc.status == 404:
        return f"not found ({exc}): a private repository needs `permissions: actions: read`"
    if exc.status == 410:
        return f"the artifact has expired ({exc})"
    return f"GitHub did not answer: {exc}"
