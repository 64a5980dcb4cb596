"""Read a downloaded artifact's zip without trusting it.

An artifact is whatever some earlier run uploaded (a PR's run can upload one too), so its
archive is untrusted input: a member named ``../../.bashrc`` or ``/etc/x`` must not be written
outside the destination, a symlink must not point anywhere, and a small zip must not inflate
into gigabytes (a zip bomb). Every member's name is checked, and its size is counted while it
is decompressed (the sizes a zip declares can lie), against a per-member and a total limit.
"""

from __future__ import annotations

import io
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from lkeval.errors import InputFileError

MIB = 1024 * 1024
_CHUNK = 64 * 1024


class ArchiveError(InputFileError):
    """An artifact's zip that lk-eval refuses: corrupt, too large, or a member it would not
    write (exit 2: a corrupt input, never a missing one)."""


@dataclass(frozen=True)
class ArchiveLimits:
    """What one archive may hold: members, each member's size, all members together."""

    max_members: int = 10_000
    max_member_bytes: int = 64 * MIB
    max_total_bytes: int = 256 * MIB


def member_name(name: str) -> str:
    """A member's name as a safe relative POSIX path, or :class:`ArchiveError`.

    Refused: absolute paths, drive letters, backslashes (a Windows separator that would climb
    on some extractors), ``..`` anywhere, NUL, and empty names.
    """
    if not name or "\x00" in name or "\\" in name:
        raise ArchiveError(f"archive member {name!r}: not a plain relative path")
    path = PurePosixPath(name)
    if path.is_absolute() or (path.parts and ":" in path.parts[0]):
        raise ArchiveError(f"archive member {name!r}: an absolute path")
    if any(part == ".." for part in path.parts):
        raise ArchiveError(f"archive member {name!r}: climbs out of the archive (..)")
    parts = [p for p in path.parts if p not in ("", ".")]
    if not parts:
        raise ArchiveError(f"archive member {name!r}: not a plain relative path")
    return "/".join(parts)


def read_archive(data: bytes, limits: ArchiveLimits | None = None) -> dict[str, bytes]:
    """Every regular file of the zip ``data``, by its safe name; :class:`ArchiveError` when the
    archive is corrupt, holds a member lk-eval would not write, or inflates past ``limits``."""
    limits = limits or ArchiveLimits()
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError) as exc:
        raise ArchiveError(f"not a zip archive: {exc}") from None
    with archive:
        infos = archive.infolist()
        if len(infos) > limits.max_members:
            raise ArchiveError(f"more than {limits.max_members} members in the archive")
        files: dict[str, bytes] = {}
        total = 0
        for info in infos:
            name = member_name(info.filename)
            if info.is_dir():
                continue
            _check_kind(info, name)
            if name in files:
                raise ArchiveError(f"archive member {name!r}: present twice")
            body = _inflate(archive, info, name, limits, limits.max_total_bytes - total)
            total += len(body)
            files[name] = body
    return files


def extract_archive(
    data: bytes, destination: Path, limits: ArchiveLimits | None = None
) -> list[Path]:
    """Write the zip's files under ``destination`` (created); the files written.

    Everything is checked before the first byte is written, so a refused archive leaves
    nothing behind.
    """
    files = read_archive(data, limits)
    root = destination.resolve()
    written: list[Path] = []
    for name, body in sorted(files.items()):
        target = (root / name).resolve()
        if not target.is_relative_to(root):  # a symlink already in the destination
            raise ArchiveError(f"archive member {name!r}: would be written outside {root}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)
        written.append(target)
    return written


def _check_kind(info: zipfile.ZipInfo, name: str) -> None:
    kind = stat.S_IFMT(info.external_attr >> 16)  # 0: no type recorded (a plain file)
    if kind and kind != stat.S_IFREG:
        raise ArchiveError(f"archive member {name!r}: not a regular file (a link or device)")
    if info.flag_bits & 0x1:
        raise ArchiveError(f"archive member {name!r}: encrypted")


def _inflate(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, limits: ArchiveLimits, room: int
) -> bytes:
    """A member's bytes, counted as they inflate (a bomb stops at the limit, not at the end)."""
    cap = min(limits.max_member_bytes, room)
    if info.file_size > cap:
        raise ArchiveError(_too_large(name, info.file_size, limits, room))
    out = bytearray()
    try:
        with archive.open(info) as member:
            while chunk := member.read(_CHUNK):
                out += chunk
                if len(out) > cap:
                    raise ArchiveError(_too_large(name, len(out), limits, room))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, OSError) as exc:
        raise ArchiveError(f"archive member {name!r}: cannot be read: {exc}") from None
    except EOFError:
        raise ArchiveError(f"archive member {name!r}: truncated") from None
    return bytes(out)


def _too_large(name: str, size: int, limits: ArchiveLimits, room: int) -> str:
    if room < limits.max_member_bytes:
        return (
            f"archive member {name!r}: the archive inflates to more than "
            f"{byte_size(limits.max_total_bytes)} (a zip bomb?)"
        )
    return (
        f"archive member {name!r}: inflates to more than {byte_size(limits.max_member_bytes)} "
        f"({size:,} bytes at least; a zip bomb?)"
    )


def byte_size(count: int) -> str:
    """``64 MiB``, ``1,000 bytes``: a limit as a person reads it."""
    return f"{count / MIB:g} MiB" if count >= MIB else f"{count:,} bytes"
