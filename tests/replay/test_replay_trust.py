"""What a run restored with ``--cassettes-from`` replays: exactly what the artifact brought and
its manifest vouches for, never a file of the checkout's ``--cassettes DIR``; and the manifest
a run writes (issue 33.2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lkeval.host.tape import Rules
from lkeval.replay import cassette as cs
from lkeval.replay.manifest import MANIFEST, Entry, Trusted, digest, read_manifest, trusted_from
from lkeval.replay.session import Cassettes
from lkeval.results.model import Attempt

IDENTITY = {"caller_model": "caller", "judge_model": "judge", "judge_prompt": "abc"}


def _write(directory: Path, scenario: str) -> bytes:
    cassette = cs.Cassette(scenario, 1, {**IDENTITY, "cassette_rules": ""}, {})
    cs.write_cassette(directory / f"{scenario}.json", cassette)
    return (directory / f"{scenario}.json").read_bytes()


def _cassettes(tmp_path: Path, mode: str, trusted: Trusted | None) -> Cassettes:
    source = tmp_path / "restored"
    return Cassettes(
        tmp_path / "checkout",
        mode,
        Rules(),
        IDENTITY,
        scratch=tmp_path / "scratch",
        restored=(source, trusted) if trusted is not None else None,
    )


def test_a_cassette_committed_in_the_checkout_is_never_replayed(tmp_path: Path) -> None:
    """A pull request renames a scenario and commits a cassette for the new id in DIR: the
    run restored from main's artifact does not read DIR, so it is not replayed."""
    (tmp_path / "checkout").mkdir()
    (tmp_path / "restored").mkdir()
    _write(tmp_path / "checkout", "renamed")
    kept = _write(tmp_path / "restored", "kept")
    trusted = Trusted("main run #12 (commit abc)", {"kept.json": Entry(digest(kept), "r", "c")})
    cassettes = _cassettes(tmp_path, "replay", trusted)
    assert cassettes.open("renamed", 1).refused == (
        "cassette renamed.json not replayed: it is not in the manifest of main run #12 (commit abc)"
    )
    assert cassettes.open("kept", 1).refused == ""


def test_a_cassette_whose_bytes_changed_is_not_replayed(tmp_path: Path) -> None:
    (tmp_path / "restored").mkdir()
    data = _write(tmp_path / "restored", "kept")
    trusted = Trusted("main run #12", {"kept.json": Entry(digest(data + b" "), "r", "c")})
    refused = _cassettes(tmp_path, "auto", trusted).open("kept", 1).refused
    assert refused.endswith("its bytes differ from the digest in the manifest of main run #12")


def test_nothing_restored_replays_nothing_even_with_files_in_the_checkout(tmp_path: Path) -> None:
    (tmp_path / "checkout").mkdir()
    (tmp_path / "restored").mkdir()
    _write(tmp_path / "checkout", "renamed")
    trusted = Trusted("github:", {}, "none restored from github: (no artifact yet)")
    tapes = _cassettes(tmp_path, "auto", trusted).open("renamed", 1)
    assert tapes.refused == (
        "cassette renamed.json not replayed: none restored from github: (no artifact yet)"
    )
    assert tapes.client_mode == "record"


def test_the_manifest_lists_what_the_run_wrote_and_replayed_in_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fully replayed cassette from the artifact is copied into DIR and listed as its own
    manifest listed it; a newly recorded one is listed with its digest and this run."""
    monkeypatch.setenv("GITHUB_RUN_ID", "42")
    monkeypatch.setenv("GITHUB_SHA", "d00d")
    (tmp_path / "restored").mkdir()
    data = _write(tmp_path / "restored", "kept")
    entry = Entry(digest(data), "github run 7", "abc")
    cassettes = _cassettes(tmp_path, "auto", Trusted("main run #7", {"kept.json": entry}))
    kept = cassettes.open("kept", 1)
    kept.agent_env()
    kept.agent_out.write_text(json.dumps({"installed": ["httpx"]}) + "\n")
    assert kept.finish(Attempt("passed")).replay.mode == "replayed"  # type: ignore[union-attr]
    new = cassettes.open("new", 1)
    new.agent_env()
    new.agent_out.write_text(json.dumps({"installed": ["httpx"]}) + "\n")
    assert new.finish(Attempt("passed")).replay.mode == "recorded"  # type: ignore[union-attr]
    assert cassettes.write_manifest() == ""
    manifest = read_manifest(tmp_path / "checkout" / MANIFEST)
    assert isinstance(manifest, dict)
    assert manifest["kept.json"] == entry
    assert (tmp_path / "checkout" / "kept.json").read_bytes() == data
    written = (tmp_path / "checkout" / "new.json").read_bytes()
    assert manifest["new.json"] == Entry(digest(written), "github run 42", "d00d")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[" * 200_000 + "]" * 200_000, "nested more than 200 levels deep"),
        (
            '{"format_version": 1, "cassettes": {"a.json": {}}}',
            "the entry of 'a.json' has no sha256",
        ),
        ('{"cassettes": {}}', "is not one lk-eval wrote"),
        ('{"format_version": 1, "cass', "not valid JSON"),
    ],
)
def test_a_bad_manifest_replays_nothing_saying_why(tmp_path: Path, text: str, says: str) -> None:
    (tmp_path / MANIFEST).write_text(text)
    trusted = trusted_from(tmp_path, "main run #3")
    assert trusted.problem.startswith("the cassettes of main run #3 have no usable manifest: ")
    assert says in trusted.problem and trusted.refusal("a.json", b"") != ""
