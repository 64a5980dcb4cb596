"""The appointment book: a sqlite file per room, and the grader that diffs it.

A generic module name on purpose: real agent directories have ``common.py``, ``context.py``,
``simulation.py`` next to ``agent.py``, and a host that imports several agents (or its own
modules) into one interpreter must not mix them up.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

SEED = (
    "CREATE TABLE appointments (name TEXT NOT NULL, day TEXT NOT NULL)",
    "INSERT INTO appointments VALUES ('Grace', 'monday')",
)


def open_book(path: Path) -> sqlite3.Connection:
    """The room's appointment book, seeded on first use (a file in the working directory)."""
    fresh = not path.exists()
    conn = sqlite3.connect(path)
    if fresh:
        for statement in SEED:
            conn.execute(statement)
        conn.commit()
    return conn


def rows(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """Every appointment, sorted, for comparing two books."""
    return sorted(conn.execute("SELECT name, day FROM appointments").fetchall())


def expected_rows(statements: Iterable[str]) -> list[tuple[str, str]]:
    """Apply the scenario's SQL to a fresh seed book; a bad statement raises (on purpose)."""
    conn = sqlite3.connect(":memory:")
    for statement in (*SEED, *statements):
        conn.execute(statement)
    return rows(conn)
