"""The cassettes' manifest: which cassettes a run vouches for, by digest, and who recorded them.

A run with ``--cassettes`` that may write cassettes (``auto``, ``record``) writes
``_manifest.json`` beside them: for each cassette it wrote or replayed in full, the SHA-256 of
the file and the run and commit that recorded it. The default branch's runs upload it with the
cassettes; a pull request's run that restores them (``--cassettes-from``) replays exactly the
cassettes the manifest lists with the digest it gives, and nothing else: a file the artifact
brought that the manifest does not name, or whose bytes changed, is not replayed, and the
reason says so (docs/replay.md, "Who can change a replayed verdict").
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lkeval.replay.cassette import MAX_CASSETTE_BYTES, CassetteError, write_text_atomically
from lkeval.text.bounded_json import BoundsError, loads_bounded
from lkeval.text.masking import mask

MANIFEST = "_manifest.json"
MANIFEST_VERSION = 1


@dataclass(frozen=True)
class Entry:
    """One cassette as the manifest lists it."""

    sha256: str
    run: str = ""
    commit: str = ""


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def provenance(environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(run, commit) of this run: GitHub Actions' run id and commit, or ("local", "")."""
    env = os.environ if environ is None else environ
    run = env.get("GITHUB_RUN_ID", "")
    return (f"github run {run}" if run else "local"), env.get("GITHUB_SHA", "")


def manifest_text(entries: Mapping[str, Entry]) -> str:
    data = {
        "format_version": MANIFEST_VERSION,
        "cassettes": {
            name: {"sha256": e.sha256, "run": e.run, "commit": e.commit}
            for name, e in sorted(entries.items())
        },
    }
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def write_manifest(directory: Path, entries: Mapping[str, Entry]) -> None:
    """Write ``DIR/_manifest.json`` (atomically, through the process's one masker, as every
    file lk-eval writes); raises :class:`CassetteError`."""
    write_text_atomically(directory / MANIFEST, mask(manifest_text(entries)))


def read_manifest(path: Path) -> dict[str, Entry] | str:
    """The manifest's entries, or why it cannot be used (missing, too large, malformed)."""
    if path.is_symlink() or not path.is_file():
        return f"{path.name} is missing"
    try:
        with path.open("rb") as fh:
            raw: Any = loads_bounded(fh.read(MAX_CASSETTE_BYTES + 1), MAX_CASSETTE_BYTES)
    except OSError as exc:
        return f"{path.name} cannot be read: {exc.strerror}"
    except BoundsError as exc:
        return f"{path.name} is not one lk-eval wrote: {exc}"
    cassettes = raw.get("cassettes") if isinstance(raw, dict) else None
    if not isinstance(cassettes, dict) or raw.get("format_version") != MANIFEST_VERSION:
        return f"{path.name} is not one lk-eval wrote"
    entries: dict[str, Entry] = {}
    for name, entry in cassettes.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
            return f"{path.name}: the entry of {name!r} has no sha256"
        entries[str(name)] = Entry(
            entry["sha256"], str(entry.get("run") or ""), str(entry.get("commit") or "")
        )
    return entries


@dataclass(frozen=True)
class Trusted:
    """What a run restored with ``--cassettes-from`` may replay: the manifest's entries, where
    they came from (``main run #12 (commit …)``), or why there is nothing (``problem``)."""

    source: str
    entries: Mapping[str, Entry]
    problem: str = ""

    def refusal(self, name: str, data: bytes | None) -> str:
        """Why the cassette ``name`` with these bytes must not be replayed ("" when it may;
        ``data`` None: whether the name is vouched for at all)."""
        if self.problem:
            return f"cassette {name} not replayed: {self.problem}"
        entry = self.entries.get(name)
        if entry is None:
            return f"cassette {name} not replayed: it is not in the manifest of {self.source}"
        if data is not None and digest(data) != entry.sha256:
            return (
                f"cassette {name} not replayed: its bytes differ from the digest in the "
                f"manifest of {self.source}"
            )
        return ""


def trusted_from(directory: Path, source: str) -> Trusted:
    """What a restored artifact in ``directory`` may replay, by its manifest."""
    found = read_manifest(directory / MANIFEST)
    if isinstance(found, str):
        return Trusted(source, {}, f"the cassettes of {source} have no usable manifest: {found}")
    return Trusted(source, found)


__all__ = [
    "MANIFEST",
    "CassetteError",
    "Entry",
    "Trusted",
    "digest",
    "manifest_text",
    "provenance",
    "read_manifest",
    "trusted_from",
    "write_manifest",
]
