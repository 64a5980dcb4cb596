"""Artifacts of a branch's runs, fetched through the real REST calls of a loopback GitHub.

What must never happen: the token reaching the storage host a download is redirected to, a
zip member written outside its folder or inflating without bound, and an artifact from another
branch, a fork's branch of the same name, a pull request's run or another workflow standing in
for the branch's own.
"""

from __future__ import annotations

import io
import stat
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from github_server import FakeGitHub, github_server

from lkeval.publish.github.api import GitHubApi, GitHubError
from lkeval.publish.github.archive import (
    ArchiveError,
    ArchiveLimits,
    extract_archive,
    member_name,
    read_archive,
)
from lkeval.publish.github.artifacts import (
    ArtifactSearch,
    FoundArtifact,
    Missing,
    branch_artifacts,
    download_artifact,
    find_artifacts,
    latest_artifact,
    restore_artifact,
)

REPO = "octo/agent"
NAME = "lk-eval-results"
KIB = 1024


def zip_of(files: dict[str, bytes], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    with github_server() as server:
        yield server


def api_of(gh: FakeGitHub) -> GitHubApi:
    return GitHubApi(gh.base_url, gh.token, timeout=5)


def search(**kw: object) -> ArtifactSearch:
    values: dict[str, object] = {"repository": REPO, "name": NAME, "branch": "main"}
    values.update(kw)
    return ArtifactSearch(**values)  # type: ignore[arg-type]


def latest(gh: FakeGitHub, **kw: object) -> FoundArtifact | Missing:
    with api_of(gh) as api:
        return latest_artifact(api, search(**kw))


# --- the zip ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["../evil", "a/../../evil", "/etc/passwd", "C:/evil", "a\\..\\..\\evil", "", "./", "a\x00b"],
)
def test_a_member_that_could_land_outside_is_refused(name: str) -> None:
    with pytest.raises(ArchiveError):
        member_name(name)


def test_traversal_in_an_archive_writes_nothing(tmp_path: Path) -> None:
    data = zip_of({"results.json": b"{}", "../escaped.txt": b"owned"})
    with pytest.raises(ArchiveError, match="climbs out"):
        extract_archive(data, tmp_path / "out")
    assert not (tmp_path / "escaped.txt").exists()
    assert not (tmp_path / "out").exists()  # checked before the first byte is written


def test_a_symlink_member_is_refused() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo("link")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(info, "/etc/passwd")
    with pytest.raises(ArchiveError, match="not a regular file"):
        read_archive(buffer.getvalue())


def test_a_zip_bomb_stops_at_the_member_limit() -> None:
    bomb = zip_of({"results.json": b"\0" * (8 * 1024 * KIB)})
    assert len(bomb) < 20 * KIB  # small on the wire
    with pytest.raises(ArchiveError, match="zip bomb"):
        read_archive(bomb, ArchiveLimits(max_member_bytes=64 * KIB))


def test_a_bomb_that_lies_about_its_size_is_counted_as_it_inflates() -> None:
    data = bytearray(zip_of({"x": b"\0" * (1024 * KIB)}))
    # Patch the declared sizes (local header and central directory) down to 10 bytes.
    real = (1024 * KIB).to_bytes(4, "little")
    data = bytearray(bytes(data).replace(real, (10).to_bytes(4, "little")))
    with pytest.raises(ArchiveError):
        read_archive(bytes(data), ArchiveLimits(max_member_bytes=64 * KIB))


def test_many_members_add_up_to_the_total_limit() -> None:
    data = zip_of({f"f{i}": b"x" * (40 * KIB) for i in range(5)})
    with pytest.raises(ArchiveError, match="the archive inflates to more than 102,400 bytes"):
        read_archive(data, ArchiveLimits(max_member_bytes=64 * KIB, max_total_bytes=100 * KIB))


def test_not_a_zip_is_an_archive_error() -> None:
    with pytest.raises(ArchiveError, match="not a zip archive"):
        read_archive(b"<html>a login page</html>")


def test_a_good_archive_extracts_under_its_folder(tmp_path: Path) -> None:
    data = zip_of({"results.json": b"{}", "logs/a.log": b"line\n", "dir/": b""})
    written = extract_archive(data, tmp_path / "out")
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in written) == [
        "logs/a.log",
        "results.json",
    ]


# --- the download: the token stays on the API host ---------------------------------------------


def test_the_redirected_download_never_carries_the_token(gh: FakeGitHub) -> None:
    gh.add_run(artifacts={NAME: zip_of({"results.json": b"{}"})})
    found = latest(gh)
    assert isinstance(found, FoundArtifact)
    with api_of(gh) as api:
        data = download_artifact(api, found)
    assert read_archive(data) == {"results.json": b"{}"}
    assert len(gh.blob_requests) == 1 and gh.blob_leaks == []
    zip_call = [r for r in gh.requests if r.path.endswith("/zip")]
    assert zip_call and zip_call[0].headers.get("Authorization") == f"Bearer {gh.token}"


def test_a_redirect_back_to_the_api_host_gets_no_token_either(gh: FakeGitHub) -> None:
    gh.add_run(artifacts={NAME: zip_of({"results.json": b"{}"})})
    gh.redirect_to = f"{gh.base_url}/user"  # a Location that names the API host itself
    found = latest(gh)
    assert isinstance(found, FoundArtifact)
    with api_of(gh) as api, pytest.raises(GitHubError, match="401"):
        download_artifact(api, found)
    (followed,) = [r for r in gh.requests if r.path == "/user"]
    assert not any(k.lower() == "authorization" for k in followed.headers)


def test_a_download_over_the_limit_is_refused(gh: FakeGitHub) -> None:
    gh.add_run(artifacts={NAME: zip_of({"results.json": b"x" * (300 * KIB)}, compression=0)})
    found = latest(gh)
    assert isinstance(found, FoundArtifact)
    with api_of(gh) as api, pytest.raises(GitHubError, match="over the"):
        download_artifact(api, found, max_bytes=100 * KIB)  # the listing's size_in_bytes
    lying = FoundArtifact(**{**found.__dict__, "size": 10})
    with api_of(gh) as api, pytest.raises(GitHubError, match="larger than"):
        download_artifact(api, lying, max_bytes=100 * KIB)  # the blob's Content-Length


def test_an_expired_artifact_is_410(gh: FakeGitHub) -> None:
    gh.add_run(artifacts={NAME: zip_of({"results.json": b"{}"})})
    found = latest(gh)
    assert isinstance(found, FoundArtifact)
    gh.artifacts[0]["expired"] = True  # expired between the listing and the download
    with api_of(gh) as api, pytest.raises(GitHubError) as caught:
        download_artifact(api, found)
    assert caught.value.status == 410 and gh.blob_requests == []


# --- which run's artifact ----------------------------------------------------------------------


def test_the_newest_run_on_the_branch_wins_and_others_are_ignored(gh: FakeGitHub) -> None:
    zip_ = zip_of({"results.json": b"{}"})
    gh.add_run(sha="a" * 40, artifacts={NAME: zip_})
    wanted = gh.add_run(sha="b" * 40, artifacts={NAME: zip_})
    gh.add_run(branch="feature", sha="c" * 40, artifacts={NAME: zip_})  # another branch
    gh.add_run(sha="d" * 40, artifacts={NAME: zip_}, head_repository_id=999)  # a fork's "main"
    gh.add_run(sha="e" * 40, artifacts={NAME: zip_}, event="pull_request")  # a PR's run
    gh.add_run(sha="f" * 40, artifacts={NAME: zip_}, conclusion="cancelled")
    gh.add_run(sha="1" * 40, artifacts={NAME: zip_}, conclusion=None)  # still running
    gh.add_run(sha="2" * 40, artifacts={"other-name": zip_})
    found = latest(gh)
    assert isinstance(found, FoundArtifact)
    assert found.head_sha == "b" * 40 and found.run_id == wanted["id"]
    assert found.describe().startswith("main run #2 (commit bbbbbbbbbbbb, success)")


def test_a_failed_gate_on_the_branch_is_still_its_baseline(gh: FakeGitHub) -> None:
    gh.add_run(sha="a" * 40, conclusion="failure", artifacts={NAME: zip_of({"r": b""})})
    found = latest(gh)
    assert isinstance(found, FoundArtifact) and found.conclusion == "failure"
    assert isinstance(latest(gh, conclusions=("success",)), Missing)


def test_the_same_workflow_and_not_this_run(gh: FakeGitHub) -> None:
    zip_ = zip_of({"r": b""})
    older = gh.add_run(artifacts={NAME: zip_})
    gh.add_run(artifacts={NAME: zip_}, workflow=".github/workflows/nightly.yml")
    current = gh.add_run(artifacts={NAME: zip_})  # a re-run attempt's own upload
    found = latest(gh, workflow_path=".github/workflows/eval.yml", exclude_run_id=current["id"])
    assert isinstance(found, FoundArtifact) and found.run_id == older["id"]


def test_the_artifact_list_is_paged_with_link_headers(gh: FakeGitHub) -> None:
    zip_ = zip_of({"r": b""})
    main = gh.add_run(artifacts={NAME: zip_})
    for _ in range(130):  # newer PR-branch uploads push main's onto page 2
        gh.add_run(branch="pr-branch", event="pull_request", artifacts={NAME: zip_})
    found = latest(gh)
    assert isinstance(found, FoundArtifact) and found.run_id == main["id"]
    pages = [r.query.get("page", ["1"])[0] for r in gh.requests if r.path.endswith("/artifacts")]
    assert pages == ["1", "2"]
    assert all(r.query.get("name") == [NAME] for r in gh.requests if r.path.endswith("/artifacts"))
    # only the candidate on the branch was looked up, not the 130 others
    assert len([r for r in gh.requests if "/actions/runs/" in r.path]) == 1


def test_several_prior_artifacts_for_a_history(gh: FakeGitHub) -> None:
    zip_ = zip_of({"r": b""})
    runs = [gh.add_run(artifacts={NAME: zip_}) for _ in range(4)]
    with api_of(gh) as api:
        found = find_artifacts(api, search(), limit=3)
    assert isinstance(found, list)
    assert [f.run_id for f in found] == [r["id"] for r in runs[::-1][:3]]


# --- nothing found: a reason, never an exception -----------------------------------------------


def test_first_run_other_branch_expired(gh: FakeGitHub) -> None:
    first = latest(gh)
    assert isinstance(first, Missing) and "no artifact 'lk-eval-results'" in first.reason
    gh.add_run(branch="feature", artifacts={NAME: zip_of({"r": b""})})
    other = latest(gh)
    assert isinstance(other, Missing) and "from a run on branch 'main'" in other.reason
    gh.add_run(artifacts={NAME: zip_of({"r": b""})}, expired=True)
    expired = latest(gh)
    assert isinstance(expired, Missing) and "expired" in expired.reason


def test_no_actions_read_permission(gh: FakeGitHub) -> None:
    gh.add_run(artifacts={NAME: zip_of({"r": b""})})
    gh.actions_read = False
    missing = latest(gh)
    assert isinstance(missing, Missing)
    assert "403" in missing.reason and "actions: read" in missing.reason


def test_a_rate_limit_is_a_reason_with_its_wait(gh: FakeGitHub) -> None:
    gh.add_run(artifacts={NAME: zip_of({"r": b""})})
    gh.rate_limit = "primary"
    missing = latest(gh)
    assert isinstance(missing, Missing)
    assert "rate limit" in missing.reason and "retry in" in missing.reason


def test_a_short_retry_after_is_waited_once(gh: FakeGitHub) -> None:
    gh.add_run(artifacts={NAME: zip_of({"r": b""})})
    gh.rate_limit, gh.retry_after, gh.rate_limit_hits = "secondary", "0", 1
    assert isinstance(latest(gh), FoundArtifact)
    gh.rate_limit, gh.retry_after, gh.rate_limit_hits = "secondary", "3600", -1
    missing = latest(gh)
    assert isinstance(missing, Missing) and "429" in missing.reason


# --- the shared restore mechanism (cassettes, prior results) -----------------------------------


def environment(gh: FakeGitHub, **extra: str) -> dict[str, str]:
    return {
        "GITHUB_API_URL": gh.base_url,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_TOKEN": gh.token,
        "GITHUB_RUN_ID": "1",
        "GITHUB_WORKFLOW_REF": f"{REPO}/.github/workflows/eval.yml@refs/pull/3/merge",
        "GITHUB_EVENT_NAME": "pull_request",
        **extra,
    }


def test_restore_unpacks_the_default_branchs_latest_artifact(
    gh: FakeGitHub, tmp_path: Path
) -> None:
    gh.add_run(artifacts={"cassettes": zip_of({"a/1.json": b"old"})})
    gh.add_run(artifacts={"cassettes": zip_of({"a/1.json": b"new", "b/2.json": b"2"})})
    gh.add_run(branch="pr", event="pull_request", artifacts={"cassettes": zip_of({"x": b"pr"})})
    with branch_artifacts("", "cassettes", environ=environment(gh)) as searched:
        assert not isinstance(searched, Missing)
        api, wanted = searched
        found = restore_artifact(api, wanted, tmp_path / "cassettes")
    assert isinstance(found, FoundArtifact) and found.branch == "main"
    assert (tmp_path / "cassettes/a/1.json").read_bytes() == b"new"
    assert sorted(p.name for p in (tmp_path / "cassettes").rglob("*.json")) == ["1.json", "2.json"]
    assert gh.blob_leaks == []


def test_restore_refuses_a_traversal_and_writes_nothing(gh: FakeGitHub, tmp_path: Path) -> None:
    gh.add_run(artifacts={"cassettes": zip_of({"ok.json": b"{}", "../../evil": b"x"})})
    with branch_artifacts("main", "cassettes", environ=environment(gh)) as searched:
        assert not isinstance(searched, Missing)
        with pytest.raises(ArchiveError, match="climbs out"):
            restore_artifact(searched[0], searched[1], tmp_path / "out")
    assert list(tmp_path.rglob("*")) == []


def test_the_search_follows_the_workflow_except_under_workflow_run(gh: FakeGitHub) -> None:
    with branch_artifacts("main", "x", environ=environment(gh)) as searched:
        assert not isinstance(searched, Missing)
        assert searched[1].workflow_path == ".github/workflows/eval.yml"
        assert searched[1].exclude_run_id == 1
    env = environment(gh, GITHUB_EVENT_NAME="workflow_run")
    with branch_artifacts("main", "x", environ=env) as searched:
        assert not isinstance(searched, Missing) and searched[1].workflow_path is None
    with branch_artifacts("main", "x", environ={**env, "GITHUB_TOKEN": ""}) as searched:
        assert isinstance(searched, Missing) and "no GitHub token" in searched.reason
