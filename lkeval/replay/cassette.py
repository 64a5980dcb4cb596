"""One cassette file per scenario attempt: what is in it, how it is read, checked and written.

A cassette is meant to be committed or uploaded as an artifact, so it holds no secret and
diffs well: no request headers at all (they carry keys), only the response headers a client
needs to parse a body (:data:`lkeval.host.tape.KEPT_RESPONSE_HEADERS`: no cookie, no date),
every string through the one process masker, keys sorted, one exchange per call in call order,
and nothing that changes on a re-record of the same conversation but what the servers sent.
It says what it was recorded with (the caller's and judge's models, a digest of lk-eval's
prompts, the format version); a cassette recorded with anything else is not replayed, and the
reason says which.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from lkeval.host.tape import FORMAT_VERSION
from lkeval.text.bounded_json import loads_bounded
from lkeval.text.file_names import attempt_stem
from lkeval.text.masking import mask_results

MAX_CASSETTE_BYTES = 32 * 1024 * 1024
"""A cassette larger than this is neither written nor read (one long conversation with tool
results is well under 1 MiB)."""
CLIENTS = ("agent", "caller", "judge")
PREFLIGHT = "_preflight"
"""The judge preflight's cassette (the run's, not a scenario's)."""


class Trust(Protocol):
    """What a run may replay (:class:`lkeval.replay.manifest.Trusted`)."""

    def refusal(self, name: str, data: bytes | None) -> str:
        """Why cassette ``name`` must not be replayed ("": it may); ``data`` None: before
        the file is read (whether the name is vouched for at all)."""
        ...


class CassetteError(Exception):
    """A cassette that cannot be written (too large, unwritable); the message says which."""


@dataclass(frozen=True)
class Cassette:
    """One attempt's exchanges by client (``agent``, ``caller``, ``judge``), in call order, and
    what they were recorded with."""

    scenario: str
    attempt: int
    recorded_with: Mapping[str, str] = field(default_factory=dict)
    exchanges: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION

    def of(self, client: str) -> list[dict[str, Any]]:
        """The client's exchanges (empty when it made none)."""
        return list(self.exchanges.get(client, ()))


def cassette_name(scenario_id: str, attempt_no: int) -> str:
    """``<id>.json`` for the first attempt, ``<id>.<n>.json`` for later ones."""
    return attempt_stem(scenario_id, attempt_no) + ".json"


def incompatibility(cassette: Cassette, identity: Mapping[str, str]) -> str | None:
    """Why a cassette must not be replayed in this run, or None."""
    if cassette.format_version != FORMAT_VERSION:
        return (
            f"cassette format version {cassette.format_version!r}, this lk-eval replays "
            f"version {FORMAT_VERSION}"
        )
    for key, now in sorted(identity.items()):
        was = cassette.recorded_with.get(key, "")
        if was != now:
            what = key.replace("_", " ")
            return f"recorded with {what} {was or '(none)'!r}, this run uses {now or '(none)'!r}"
    return None


def read_cassette(path: Path, trusted: Trust | None = None) -> Cassette | str:
    """The cassette at ``path``, or why it cannot be replayed (missing, a symlink, too large,
    too deep, malformed; with ``trusted``, not in the restored artifact's manifest)."""
    if trusted is not None and trusted.refusal(path.name, None):
        return trusted.refusal(path.name, None)
    data = read_bounded(path)
    if isinstance(data, str):
        return data
    if trusted is not None:
        refusal = trusted.refusal(path.name, data)
        if refusal:
            return refusal
    try:
        raw = loads_bounded(data, MAX_CASSETTE_BYTES)
        exchanges = {str(c): _exchanges(v) for c, v in dict(raw.get("exchanges") or {}).items()}
        return Cassette(
            scenario=str(raw["scenario"]),
            attempt=int(raw["attempt"]),
            recorded_with={str(k): str(v) for k, v in dict(raw.get("recorded_with", {})).items()},
            exchanges=exchanges,
            format_version=raw.get("format_version"),
        )
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        return f"cassette {path} is not one lk-eval wrote ({type(exc).__name__}: {exc})"


def read_bounded(path: Path) -> bytes | str:
    """The bytes of a cassette file, or why they are not read: a cassette that is a symlink,
    not a regular file, or larger than :data:`MAX_CASSETTE_BYTES` names the file."""
    try:
        if path.is_symlink():
            return f"cassette {path} is a symlink: not replayed"
        if not path.exists():
            return "no cassette recorded for this attempt"
        if not path.is_file():
            return f"cassette {path} is not a regular file: not replayed"
        with path.open("rb") as fh:
            data = fh.read(MAX_CASSETTE_BYTES + 1)
    except OSError as exc:
        return f"cassette {path} cannot be read: {exc.strerror}"
    if len(data) > MAX_CASSETTE_BYTES:
        return f"cassette {path} is over {MAX_CASSETTE_BYTES // 2**20} MiB: not replayed"
    return data


def _exchanges(value: Any) -> list[dict[str, Any]]:
    """A client's exchanges, each an object (a list of anything else is no cassette)."""
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise TypeError("exchanges must be lists of objects")
    for exchange in value:
        if not isinstance(exchange.get("request", {}), dict) or not isinstance(
            exchange.get("response", {}), dict
        ):
            raise TypeError("an exchange's request and response must be objects")
    return list(value)


def cassette_text(cassette: Cassette) -> str:
    """The file's text: masked, keys sorted, one level of indent per nesting, no timestamps."""
    exchanges = {
        client: [
            {k: v for k, v in e.items() if k != "replayed"}
            for e in sorted(items, key=lambda e: int(e.get("call", 0)))
        ]
        for client, items in cassette.exchanges.items()
        if items
    }
    data = mask_results(
        {
            "format_version": cassette.format_version,
            "scenario": cassette.scenario,
            "attempt": cassette.attempt,
            "recorded_with": dict(cassette.recorded_with),
            "exchanges": exchanges,
        }
    )
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def write_cassette(path: Path, cassette: Cassette) -> str:
    """Write atomically (a temp file beside it, then a rename); the file's SHA-256 (for the
    manifest). Raises :class:`CassetteError`."""
    text = cassette_text(cassette)
    size = len(text.encode("utf-8"))
    if size > MAX_CASSETTE_BYTES:
        raise CassetteError(
            f"cassette {path.name} would be {size / 2**20:.1f} MiB, over the "
            f"{MAX_CASSETTE_BYTES // 2**20} MiB bound: not recorded"
        )
    write_text_atomically(path, text)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_text_atomically(path: Path, text: str) -> None:
    """``text`` into ``path`` through a temp file beside it and a rename: a write that fails
    (disk full, read-only, a directory where the file should be) removes the temp file and
    raises :class:`CassetteError` naming the file."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temp.write_text(text, encoding="utf-8")
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise CassetteError(f"cassette {path} cannot be written: {exc.strerror}") from None


__all__ = [
    "CLIENTS",
    "MAX_CASSETTE_BYTES",
    "PREFLIGHT",
    "Cassette",
    "CassetteError",
    "cassette_name",
    "cassette_text",
    "incompatibility",
    "read_bounded",
    "read_cassette",
    "write_cassette",
    "write_text_atomically",
]
