"""Cassettes are bounded input, and a failed write leaves nothing behind (issue 30): a cassette
or ``_preflight.json`` that is too deep, too large, truncated, of the wrong schema, a symlink
or not a regular file is refused with the file named (an error for that attempt in
``replay``, never an exception); a cassette that cannot be written removes its temp file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lkeval.host.tape import Rules
from lkeval.replay import cassette as cs
from lkeval.replay.session import Cassettes
from lkeval.results.model import Attempt

IDENTITY = {"caller_model": "caller", "judge_model": "judge", "judge_prompt": "abc"}
GOOD = {
    "format_version": 2,
    "scenario": "s",
    "attempt": 1,
    "recorded_with": {},
    "exchanges": {"agent": [{"call": 1, "request": {"url": "http://h/"}, "response": {}}]},
}


def _cassettes(tmp_path: Path, mode: str = "replay") -> Cassettes:
    return Cassettes(tmp_path / "tapes", mode, Rules(), IDENTITY, scratch=tmp_path / "scratch")


def _bad(tmp_path: Path, name: str, make: str) -> Path:
    directory = tmp_path / "tapes"
    directory.mkdir(exist_ok=True)
    path = directory / name
    if make == "deep":
        path.write_text("[" * 200_000 + "]" * 200_000)
    elif make == "deep-but-parses":
        path.write_text(json.dumps({**GOOD, "x": json.loads("[" * 500 + "]" * 500)}))
    elif make == "huge":
        with path.open("wb") as fh:
            fh.truncate(cs.MAX_CASSETTE_BYTES + 1)
    elif make == "truncated":
        path.write_text(json.dumps(GOOD)[:40])
    elif make == "schema":
        path.write_text(json.dumps({**GOOD, "exchanges": {"agent": [1, 2]}}))
    elif make == "schema-request":
        path.write_text(json.dumps({**GOOD, "exchanges": {"agent": [{"request": "GET /"}]}}))
    elif make == "symlink":
        (tmp_path / "elsewhere.json").write_text(json.dumps(GOOD))
        path.symlink_to(tmp_path / "elsewhere.json")
    elif make == "directory":
        path.mkdir()
    return path


@pytest.mark.parametrize(
    ("make", "says"),
    [
        ("deep", "nested more than 200 levels deep"),
        ("deep-but-parses", "nested more than 200 levels deep"),
        ("huge", "is over 32 MiB: not replayed"),
        ("truncated", "not valid JSON"),
        ("schema", "exchanges must be lists of objects"),
        ("schema-request", "an exchange's request and response must be objects"),
        ("symlink", "is a symlink: not replayed"),
        ("directory", "is not a regular file: not replayed"),
    ],
)
@pytest.mark.parametrize("name", ["s.json", "_preflight.json"])
def test_a_bad_cassette_is_refused_naming_the_file(
    tmp_path: Path, make: str, says: str, name: str
) -> None:
    path = _bad(tmp_path, name, make)
    cassettes = _cassettes(tmp_path)
    tapes = cassettes.preflight() if name == "_preflight.json" else cassettes.open("s", 1)
    assert says in tapes.refused and str(path) in tapes.refused, tapes.refused
    attempt = tapes.finish(Attempt(status="error"))
    assert attempt.status == "error" and says in attempt.reason
    assert attempt.replay is not None and attempt.replay.mode == "missed"


def test_a_scenario_id_cannot_name_a_file_outside_the_directory(tmp_path: Path) -> None:
    for scenario in ("../../escape", "/etc/passwd", "..", "a/../../b"):
        name = cs.cassette_name(scenario, 1)
        assert "/" not in name and (tmp_path / name).parent == tmp_path, name


@pytest.mark.parametrize("blocker", ["directory", "file-as-parent"])
def test_a_cassette_that_cannot_be_written_leaves_no_temp_file(
    tmp_path: Path, blocker: str
) -> None:
    if blocker == "directory":  # a directory where the cassette should be
        target = tmp_path / "s.json"
        target.mkdir()
        (target / "keep").write_text("x")
    else:  # DIR is a regular file
        (tmp_path / "dir").write_text("x")
        target = tmp_path / "dir" / "s.json"
    with pytest.raises(cs.CassetteError, match=f"cassette {target} cannot be written"):
        cs.write_cassette(target, cs.Cassette("s", 1, IDENTITY, {}))
    assert sorted(p.name for p in tmp_path.rglob("*.tmp")) == []


def test_a_failed_write_is_the_attempts_error_and_leaves_no_temp_file(tmp_path: Path) -> None:
    cassettes = _cassettes(tmp_path, "record")
    (tmp_path / "tapes").mkdir()
    (tmp_path / "tapes" / "_preflight.json").mkdir()
    tapes = cassettes.preflight()
    tapes.agent_env()
    tapes.agent_out.write_text(json.dumps({"installed": ["httpx"]}) + "\n")
    done = tapes.finish(Attempt("passed"))
    assert done.status == "error" and "_preflight.json cannot be written" in done.reason
    assert list((tmp_path / "tapes").glob(".*.tmp")) == []
