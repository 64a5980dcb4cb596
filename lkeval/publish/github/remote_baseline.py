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

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lkeval.defaults import BASELINE_ARTIFACT
from lkeval.errors import InputFileError
from lkeval.publish.github.api import GitHubError
from lkeval.publish.github.archive import ArchiveError, ArchiveLimits, read_archive
from lkeval.publish.github.artifacts import (
    FoundArtifact,
    Missing,
    branch_artifacts,
    download_artifact,
    latest_artifact,
)
from lkeval.results.model import RunResults
from lkeval.results.results_json import MAX_RESULTS_BYTES, ResultsFileError, load_results

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
    branch = spec[len(PREFIX) :].strip()
    with branch_artifacts(branch, artifact, token=token, environ=environ) as searched:
        if isinstance(searched, Missing):
            return FetchedBaseline(None, missing=searched.reason)
        api, search = searched
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
