"""A scenario id as a file name: every file named after a scenario's attempt is named here.

A scenario id is free text from the scenario file (a PR can change it), so it never reaches a
path as it is. Two rules, each kept because files on disk depend on it:

* :func:`attempt_stem` names the attempt's log (``logs/<stem>.log``) and its cassette
  (``<stem>.json``): every character but letters, digits, ``-``, ``_`` and ``.`` becomes
  ``_``, cut at 120 characters. A cassette recorded by one release is found by the next, so
  changing this rule would orphan every recorded cassette.
* :func:`call_file_stem` names an audio attempt's recording and timeline: readable, and unique
  by a digest of the id (two ids that read alike never share a WAV).
"""

from __future__ import annotations

import hashlib
import re

STEM_CHARS = 120
"""The longest log and cassette stem: well under any file system's 255 bytes."""
CALL_STEM_CHARS = 60
"""The readable part of a call file's stem (a digest and the attempt follow it)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def file_stem(scenario_id: str) -> str:
    """``scenario_id`` with every character a file name should not hold replaced by ``_``."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in scenario_id)[:STEM_CHARS]


def attempt_stem(scenario_id: str, attempt_no: int) -> str:
    """``<stem>`` for a scenario's first attempt, ``<stem>.<n>`` for its later ones."""
    return file_stem(scenario_id) + (f".{attempt_no}" if attempt_no > 1 else "")


def call_file_stem(scenario_id: str, attempt: int = 1) -> str:
    """A file name stem for a scenario's attempt: safe, bounded, unique per (id, attempt)."""
    readable = _UNSAFE.sub("-", scenario_id).strip("-.")[:CALL_STEM_CHARS] or "scenario"
    digest = hashlib.sha256(scenario_id.encode("utf-8")).hexdigest()[:8]
    return f"{readable}-{digest}-attempt{attempt}"


__all__ = ["CALL_STEM_CHARS", "STEM_CHARS", "attempt_stem", "call_file_stem", "file_stem"]
