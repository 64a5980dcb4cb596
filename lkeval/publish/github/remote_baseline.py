"""``--baseline github:BRANCH``: the results file of BRANCH's latest finished run, fetched.

The results artifact of the latest qualifying run on the branch (see
:mod:`lkeval.publish.github.artifacts`) is downloaded, its zip checked
(:mod:`lkeval.publish.github.archive`) and its ``results.json`` read like ``--baseline FILE``.
``github:`` alone means the repository's default branch (the Action's ``baseline: auto``).

What is missing is not an error: a first run, expired artifacts, a token without
``actions: read`` or a rate limit give a :class:`FetchedBaseline` without results and with the
reason, and the gate goes on without a baseline (``--fail-on regression`` then acts as
``any``, so a missing baseline can block a merge, never wave one through). What is there but
broken (not a zip, a zip bomb, a member climbing out, no or an invalid ``results.json``) is a
:class:`RemoteBaselineError`: exit 2, like a corrupt ``--baseline FILE``.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lkeval.defaults import BASELINE_ARTIFACT
from lkeval.errors import InputFileError
from lkeval.publish.github.api import GitHubApi, GitHubError, json_of
from lkeval.publish.github.archive import ArchiveError, ArchiveLimits, read_archive
from lkeval.publish.github.artifacts import (
    ArtifactSearch,
    FoundArtifact,
    Missing,
    download_artifact,
    latest_artifact,
)
from lkeval.publish.github.context import GitHubContext, read_context
from lkeval.results.model import MAX_RESULTS_BYTES, ResultsFileError, RunResults, load_results

PREFIX = "github:"
RESULTS_MEMBER = "results.json"


class RemoteBaselineError(InputFileError):
    """The baseline artifact was found but cannot be used (exit 2)."""


@dataclass(frozen=True)
class FetchedBaseline:
    """The baseline's results and where they came from, or why there is none."""

    results: RunResults | None
    source: str = ""
    url: str | None = None
    missing: str | None = None


def is_remote(spec: str | None) -> bool:
    """Whether a ``--baseline`` value names a branch on GitHub rather than a file."""
    return bool(spec) and str(spec).startswith(PREFIX)


def fetch_baseline(
    spec: str,
    *,
    artifact: str = BASELINE_ARTIFACT,
    token: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> FetchedBaseline:
    """The results of ``github:BRANCH``'s latest qualifying run, or why there are none."""
    env = os.environ if environ is None else environ
    ctx = read_context(env, token=token)
    if not ctx.repository:
        return FetchedBaseline(None, missing="GITHUB_REPOSITORY (owner/name) is not set")
    if not ctx.token:
        return FetchedBaseline(
            None, missing="no GitHub token (set GITHUB_TOKEN or pass --github-token)"
        )
    with GitHubApi(ctx.api_url, ctx.token) as api:
        branch = spec[len(PREFIX) :].strip() or _default_branch(api, ctx, env)
        if isinstance(branch, Missing):
            return FetchedBaseline(None, missing=branch.reason)
        search = ArtifactSearch(
            repository=ctx.repository,
            name=artifact,
            branch=branch,
            workflow_path=_workflow_path(ctx, env),
            exclude_run_id=int(ctx.run_id) if ctx.run_id and ctx.run_id.isdigit() else None,
        )
        found = latest_artifact(api, search)
        if isinstance(found, Missing):
            return FetchedBaseline(None, missing=found.reason)
        try:
            data = download_artifact(api, found)
        except GitHubError as exc:
            if exc.status == 413:
                raise RemoteBaselineError(f"baseline {spec}: {exc}") from None
            return FetchedBaseline(
                None, missing=f"the download of {found.describe()} failed: {exc}"
            )
    return FetchedBaseline(_results_of(data, found, spec), found.describe(), found.run_url)


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
    """This run's workflow file (``.github/workflows/eval.yml``): the baseline must come from
    the same workflow. Not under ``workflow_run``, whose workflow is the one reporting on the
    evaluated run, not the one that evaluated."""
    ref = env.get("GITHUB_WORKFLOW_REF", "")
    if not ref or ctx.event_name == "workflow_run" or not ctx.repository:
        return None
    path = ref.split("@", 1)[0]
    prefix = f"{ctx.repository}/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def _results_of(data: bytes, found: FoundArtifact, spec: str) -> RunResults:
    """The artifact's ``results.json``, read like ``--baseline FILE``."""
    where = f"baseline {spec} ({found.describe()}, artifact {found.name!r})"
    limits = ArchiveLimits(
        max_member_bytes=MAX_RESULTS_BYTES, max_total_bytes=4 * MAX_RESULTS_BYTES
    )
    try:
        files = read_archive(data, limits)
    except ArchiveError as exc:
        raise RemoteBaselineError(f"{where}: {exc}") from None
    name = _results_member(files)
    if name is None:
        shown = ", ".join(sorted(files)[:5]) or "nothing"
        raise RemoteBaselineError(f"{where}: holds no {RESULTS_MEMBER} (it holds {shown})")
    with tempfile.TemporaryDirectory(prefix="lkeval-baseline-") as tmp:
        path = Path(tmp) / RESULTS_MEMBER
        path.write_bytes(files[name])
        try:
            return load_results(path)
        except ResultsFileError as exc:
            raise RemoteBaselineError(f"{where}: {str(exc).replace(str(path), name)}") from None


def _results_member(files: Mapping[str, bytes]) -> str | None:
    """``results.json`` at the archive's root, else the only one in a folder."""
    if RESULTS_MEMBER in files:
        return RESULTS_MEMBER
    nested = [n for n in files if n.rsplit("/", 1)[-1] == RESULTS_MEMBER]
    return nested[0] if len(nested) == 1 else None
