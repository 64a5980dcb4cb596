"""``--cassettes-from github:BRANCH``: the default branch's cassettes, restored before a run.

The CI recipe records cassettes on pushes to the default branch and uploads them as an artifact
(``lk-eval-cassettes``); a pull request's run restores the latest into ``--cassettes DIR`` and
replays what did not change. The artifact is found and unpacked by the same mechanism as
``--baseline github:BRANCH`` (:mod:`lkeval.publish.github.artifacts`): only the branch's own
runs qualify (a push, a schedule or a manual run; never a pull request's or a fork's), the
download is bounded and every member is checked before a byte is written.

The artifact is unpacked into a directory lk-eval creates fresh for the run, never into
``DIR`` (which holds the pull request's tree: files a pull request commits there must not be
replayed), and what may be replayed is what its manifest lists (:mod:`lkeval.replay.manifest`):
a cassette not in it, or whose bytes differ from its digest there, is not replayed, saying why.

None to be found (the first run, expired artifacts, a token without ``actions: read``) is a
note: nothing is replayed, and every scenario runs live (or, with ``--cassette-mode replay``,
is an error, never a pass). An artifact that is there but refused (a member climbing out, a
bomb) is exit 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from lkeval.errors import InputFileError
from lkeval.publish.github.archive import ArchiveError
from lkeval.publish.github.artifacts import Missing, branch_artifacts, restore_artifact
from lkeval.replay.manifest import MANIFEST, Trusted, trusted_from

PREFIX = "github:"


class CassetteRestoreError(InputFileError):
    """The cassettes artifact was found but cannot be unpacked (exit 2)."""


def restore_cassettes(
    spec: str,
    destination: Path,
    *,
    artifact: str,
    token: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[str, Trusted]:
    """Unpack ``spec``'s latest cassettes artifact into ``destination`` (a fresh, empty
    directory); the line to print, and what of it may be replayed."""
    branch = spec[len(PREFIX) :].strip()
    with branch_artifacts(branch, artifact, token=token, environ=environ) as searched:
        if isinstance(searched, Missing):
            return _none(spec, searched.reason)
        api, search = searched
        try:
            found = restore_artifact(api, search, destination)
        except ArchiveError as exc:
            raise CassetteRestoreError(f"--cassettes-from {spec}: {exc}") from None
    if isinstance(found, Missing):
        return _none(spec, found.reason)
    trusted = trusted_from(destination, found.describe())
    files = sorted(p.name for p in destination.iterdir() if p.name != MANIFEST)
    unlisted = [name for name in files if name not in trusted.entries]
    line = f"cassettes: {found.describe()} restored ({len(files) - len(unlisted)} in its manifest)"
    if trusted.problem:
        line += f"; none replayed: {trusted.problem}"
    elif unlisted:
        line += f"; not replayed, not in its manifest: {', '.join(unlisted[:5])}"
        line += f" and {len(unlisted) - 5} more" if len(unlisted) > 5 else ""
    return line, trusted


def _none(spec: str, reason: str) -> tuple[str, Trusted]:
    why = f"none restored from {spec} ({reason})"
    return f"cassettes: {why}; every scenario runs live", Trusted(spec, {}, why)
