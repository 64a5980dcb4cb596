"""``--cassettes-from github:BRANCH``: the branch's latest cassettes artifact restored into
``--cassettes DIR`` through the loopback GitHub; none found is a note, a refused archive exit 2."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from github_server import FakeGitHub, github_server

from lkeval.cli import build_parser
from lkeval.cli.options import run_options
from lkeval.errors import ExitCode, UsageError
from lkeval.publish.github.restore_cassettes import CassetteRestoreError, restore_cassettes
from lkeval.replay.manifest import Entry, digest, manifest_text

REPO = "octo/agent"
NAME = "lk-eval-cassettes"


def zip_of(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    with github_server() as server:
        yield server


def environment(gh: FakeGitHub) -> dict[str, str]:
    return {
        "GITHUB_API_URL": gh.base_url,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_TOKEN": gh.token,
        "GITHUB_RUN_ID": "1",
        "GITHUB_EVENT_NAME": "pull_request",
    }


def manifest_of(files: dict[str, bytes]) -> bytes:
    entries = {name: Entry(digest(data), "github run 7", "abc") for name, data in files.items()}
    return manifest_text(entries).encode()


def test_the_default_branchs_latest_cassettes_are_restored(gh: FakeGitHub, tmp_path: Path) -> None:
    old, new = {"book.json": b"old"}, {"book.json": b"new", "_preflight.json": b"{}"}
    gh.add_run(artifacts={NAME: zip_of({**old, "_manifest.json": manifest_of(old)})})
    gh.add_run(artifacts={NAME: zip_of({**new, "_manifest.json": manifest_of(new)})})
    gh.add_run(branch="pr", event="pull_request", artifacts={NAME: zip_of({"book.json": b"pr"})})
    line, trusted = restore_cassettes(
        "github:", tmp_path / "c", artifact=NAME, environ=environment(gh)
    )
    assert line.startswith("cassettes: main run #") and line.endswith(
        "restored (2 in its manifest)"
    )
    assert (tmp_path / "c" / "book.json").read_bytes() == b"new"  # main's latest, never the PR's
    assert trusted.refusal("book.json", b"new") == ""
    assert gh.blob_leaks == []


def test_only_what_the_manifest_lists_with_its_digest_is_replayable(
    gh: FakeGitHub, tmp_path: Path
) -> None:
    """A file the artifact brought that the manifest does not list, or whose bytes are not
    the ones it vouches for, is not replayed, saying why."""
    listed = {"book.json": b"new"}
    files = {**listed, "extra.json": b"{}", "_manifest.json": manifest_of(listed)}
    gh.add_run(artifacts={NAME: zip_of(files)})
    line, trusted = restore_cassettes(
        "github:", tmp_path / "c", artifact=NAME, environ=environment(gh)
    )
    assert line.endswith("(1 in its manifest); not replayed, not in its manifest: extra.json")
    source = trusted.source
    assert trusted.refusal("extra.json", b"{}") == (
        f"cassette extra.json not replayed: it is not in the manifest of {source}"
    )
    assert trusted.refusal("book.json", b"edited") == (
        "cassette book.json not replayed: its bytes differ from the digest in the manifest of "
        f"{source}"
    )


def test_an_artifact_without_a_manifest_replays_nothing(gh: FakeGitHub, tmp_path: Path) -> None:
    gh.add_run(artifacts={NAME: zip_of({"book.json": b"new"})})
    line, trusted = restore_cassettes(
        "github:", tmp_path / "c", artifact=NAME, environ=environment(gh)
    )
    assert "none replayed: the cassettes of main run #" in line
    assert "have no usable manifest: _manifest.json is missing" in line
    assert trusted.refusal("book.json", b"new").startswith("cassette book.json not replayed: ")


def test_none_found_is_a_note_and_nothing_is_written(gh: FakeGitHub, tmp_path: Path) -> None:
    line, trusted = restore_cassettes(
        "github:main", tmp_path / "c", artifact=NAME, environ=environment(gh)
    )
    assert line.startswith("cassettes: none restored from github:main (")
    assert line.endswith("; every scenario runs live")
    assert trusted.refusal("book.json", b"").startswith(
        "cassette book.json not replayed: none restored from github:main ("
    )
    assert not (tmp_path / "c").exists()
    no_token = {**environment(gh), "GITHUB_TOKEN": ""}
    line, _ = restore_cassettes("github:main", tmp_path / "c", artifact=NAME, environ=no_token)
    assert "no GitHub token" in line


def test_a_refused_archive_is_exit_2_and_writes_nothing(gh: FakeGitHub, tmp_path: Path) -> None:
    gh.add_run(artifacts={NAME: zip_of({"ok.json": b"{}", "../../evil": b"x"})})
    with pytest.raises(
        CassetteRestoreError, match=r"--cassettes-from github:main: .*climbs out"
    ) as e:
        restore_cassettes("github:main", tmp_path / "c", artifact=NAME, environ=environment(gh))
    assert e.value.exit_code == ExitCode.USAGE
    assert list(tmp_path.rglob("*")) == []


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--cassettes-from", "github:"], "--cassettes-from needs --cassettes DIR"),
        (["--cassettes", "c", "--cassettes-from", "main"], "is not github:BRANCH"),
    ],
)
def test_the_flag_needs_a_directory_and_a_github_branch(extra: list[str], message: str) -> None:
    args = build_parser().parse_args(["run", "--agent", "a.py", "--scenarios", "s.yaml", *extra])
    with pytest.raises(UsageError, match=message):
        run_options(args)
