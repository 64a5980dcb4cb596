"""``--cassettes-from github:BRANCH``: the default branch's cassettes, restored before a run.

The CI recipe records cassettes on pushes to the default branch and uploads them as an artifact
(``lk-eval-cassettes``); a pull request's run restores the latest into ``--cassettes DIR`` and
replays what did not change. The artifact is found and unpacked by the same mechanism as
``--baseline github:BRANCH`` (:mod:`lkeval.publish.github.artifacts`): only the branch's own
runs qualify (a push, a schedule or a manual run; never a pull request's or a fork's), the
download is bounded and every member is checked before a byte is written.

None to be found (the first run, expired artifacts, a token without ``actions: read``) is a
note: the run goes on with what ``DIR`` holds, and a scenario without a cassette runs live (or,
with ``--cassette-mode replay``, is an error, never a pass). An artifact that is there but
refused (a member climbing out, a bomb) is exit 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from lkeval.errors import InputFileError
from lkeval.publish.github.archive import ArchiveError
from lkeval.publish.github.artifacts import Missing, branch_artifacts, restore_artifact

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
) -> str:
    """Unpack ``spec``'s latest cassettes artifact into ``destination``; the line to print."""
    branch = spec[len(PREFIX) :].strip()
    with branch_artifacts(branch, artifact, token=token, environ=environ) as searched:
        if isinstance(searched, Missing):
            return f"cassettes: none restored from {spec} ({searched.reason})"
        api, search = searched
        try:
            found = restore_artifact(api, search, destination)
        except ArchiveError as exc:
            raise CassetteRestoreError(f"--cassettes-from {spec}: {exc}") from None
    if isinstance(found, Missing):
        return f"cassettes: none restored from {spec} ({found.reason})"
    return f"cassettes: {found.describe()} restored into {destination}"
