"""The release: the workflow that pins action.yml to a pushed image, and the linters that
check action.yml and every workflow the way GitHub will read them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT

PIN = ROOT / ".ci" / "pin-image"
RELEASE = ROOT / ".github" / "workflows" / "release.yml"
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml")) + sorted(
    (ROOT / "examples" / "workflows").glob("*.yml")
)
DIGEST = "ghcr.io/acme/lk-eval@sha256:" + "ab" * 32


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads a bare `on` as true
    return data


def pin(tmp_path: Path, reference: str) -> subprocess.CompletedProcess[str]:
    target = tmp_path / "action.yml"
    if not target.exists():
        shutil.copy(ROOT / "action.yml", target)
    return subprocess.run(
        [sys.executable, str(PIN), str(target), reference],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_pin_image_rewrites_only_the_image_line(tmp_path: Path) -> None:
    proc = pin(tmp_path, DIGEST)
    assert proc.returncode == 0, proc.stderr
    before = (ROOT / "action.yml").read_text().splitlines()
    after = (tmp_path / "action.yml").read_text().splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert changed == [
        (next(x for x in before if x.startswith("  image:")), f"  image: docker://{DIGEST}")
    ]
    assert load(tmp_path / "action.yml")["runs"]["image"] == f"docker://{DIGEST}"


@pytest.mark.parametrize(
    "reference", ["ghcr.io/acme/lk-eval:1.0.0", "lk-eval@sha256:abc", f"{DIGEST}\nargs: [x]"]
)
def test_pin_image_refuses_anything_but_a_digest(tmp_path: Path, reference: str) -> None:
    proc = pin(tmp_path, reference)
    assert proc.returncode == 1 and "not an image reference by digest" in proc.stderr
    assert (tmp_path / "action.yml").read_text() == (ROOT / "action.yml").read_text()


def test_release_builds_tests_pushes_then_pins_on_the_tag() -> None:
    wf = load(RELEASE)
    assert list(wf["on"]) == ["push"] and wf["on"]["push"]["tags"]
    assert wf["permissions"] == {}, "each job gets only what it uses"
    jobs = wf["jobs"]
    # nothing is built or published unless the whole CI workflow passes on the tagged commit
    tests = jobs.pop("ci")
    assert tests["uses"] == "./.github/workflows/ci.yml"
    assert tests["permissions"] == {"contents": "read"}
    assert jobs["image"]["needs"] == "ci" and jobs["dist"]["needs"] == "ci"
    ci = load(RELEASE.parent / "ci.yml")
    assert "workflow_call" in ci["on"] and "pull_request" in ci["on"]
    steps = [step for job in ci["jobs"].values() for step in job["steps"]]
    runs = " ".join(str(step.get("run", "")) for step in steps)
    for target in ("make test", "make test-exhaustive", "make lint", ".ci/wheel-check"):
        assert target in runs, f"ci.yml does not run {target}"
    assert jobs["image"]["permissions"] == {"contents": "read", "packages": "write"}
    assert jobs["dist"]["permissions"] == {"contents": "read"}
    assert jobs["tags"]["permissions"] == {"contents": "write"}
    assert jobs["pypi"]["permissions"] == {"id-token": "write"}
    assert set(jobs["tags"]["needs"]) == {"image", "dist"} and jobs["pypi"]["needs"] == "tags"
    scripts = [str(step.get("run", "")) for step in jobs["image"]["steps"]]
    order = ["docker build", ".ci/image-check", "docker push", ".ci/anonymous-pull"]
    at = [next(n for n, s in enumerate(scripts) if word in s) for word in order]
    assert at == sorted(at), "build, test the image, push, then pull it as anyone"
    build = next(s for s in scripts if "docker build" in s)
    for arg in ("VERSION=", "REVISION=$GITHUB_SHA", "SOURCE="):
        assert arg in build
    (tags,) = [str(s.get("run", "")) for s in jobs["tags"]["steps"] if "run" in s]
    assert tags.index(".ci/release-tags") < tags.index(".ci/pin-image") < tags.index("git push")
    assert "wheel-check" in str(jobs["dist"]["steps"])
    publish = jobs["pypi"]["steps"][-1]
    assert publish["uses"].startswith("pypa/gh-action-pypi-publish@")
    assert "with" not in publish, "trusted publishing: no password or token"
    for job in jobs.values():
        for step in job["steps"]:
            assert "${{" not in str(step.get("run", "")), "expressions go through env:"


ACTION_PIN = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$")


def test_every_action_is_pinned_by_commit_with_its_version() -> None:
    """Third-party actions by SHA with the version as a comment; only lk-eval itself is
    written as users write it (`@v1`, .github/zizmor.yml says why)."""
    for path in WORKFLOWS:
        for line in path.read_text(encoding="utf-8").splitlines():
            if "uses:" not in line or line.lstrip().startswith("#"):
                continue
            ref = line.split("uses:", 1)[1].strip()
            if ref.startswith("./.github/workflows/"):  # this repository's own, same commit
                continue
            if ref.startswith("org/lk-eval@"):
                assert ref == "org/lk-eval@v1", f"{path.name}: {ref}"
                continue
            assert ACTION_PIN.match(ref), f"{path.name}: {ref}"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()


def release_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "lkeval").mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    return repo


def commit_version(repo: Path, version: str, image: str) -> None:
    (repo / "lkeval" / "__init__.py").write_text(f'__version__ = "{version}"\n')
    (repo / "action.yml").write_text(f"runs:\n  image: docker://{image}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", version)


PLACEHOLDER = "ghcr.io/org/lk-eval@sha256:" + "0" * 64


def release_tags(repo: Path, version: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "release-tags"), version],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_release_tags_move_the_version_once_and_the_major_forward_only(tmp_path: Path) -> None:
    repo = release_repo(tmp_path)
    commit_version(repo, "1.0.0", PLACEHOLDER)
    git(repo, "tag", "v1.0.0")  # the maintainer's tag, on a commit not yet pinned
    assert release_tags(repo, "1.0.0").stdout.split() == ["v1.0.0", "v1"]
    commit_version(repo, "1.0.0", DIGEST)  # what release.yml commits, then tags
    git(repo, "tag", "-f", "v1.0.0")
    git(repo, "tag", "v1")
    again = release_tags(repo, "1.0.0")  # a re-run must not repoint a release users pinned
    assert again.returncode == 1 and "v1.0.0 is released already" in again.stdout
    commit_version(repo, "1.1.0", DIGEST)
    git(repo, "tag", "-f", "v1")
    commit_version(repo, "1.0.1", PLACEHOLDER)  # a patch of the older minor
    git(repo, "tag", "v1.0.1")
    assert release_tags(repo, "1.0.1").stdout.split() == ["v1.0.1"], "v1 stays on 1.1.0"
    assert release_tags(repo, "1.2.0").stdout.split() == ["v1.2.0", "v1"]
    assert release_tags(repo, "2.0.0").stdout.split() == ["v2.0.0", "v2"]


def test_docs_and_examples_use_the_major_tag_of_this_version() -> None:
    """What users write (`@vX`) is the major tag the release of this version moves."""
    import lkeval

    major = f"v{lkeval.__version__.split('.')[0]}"
    for path in [ROOT / "README.md", ROOT / "docs" / "action.md", *WORKFLOWS]:
        refs = set(re.findall(r"org/lk-eval@(v[0-9][0-9.]*)", path.read_text(encoding="utf-8")))
        assert refs <= {major, f"v{lkeval.__version__}"}, f"{path.name}: {refs}"
    installs = set(re.findall(r"lk-eval==([0-9.]+)", "".join(p.read_text() for p in WORKFLOWS)))
    assert installs <= {lkeval.__version__}, installs


def linter(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    assert found, f"{name} is in the lint extra (make setup installs it)"
    return found


def test_actionlint_is_clean_on_every_workflow() -> None:
    proc = subprocess.run(
        [linter("actionlint"), "-shellcheck=", "-pyflakes=", *map(str, WORKFLOWS)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("schema", "files"),
    [("vendor.github-workflows", WORKFLOWS), ("vendor.github-actions", [ROOT / "action.yml"])],
)
def test_action_and_workflows_match_githubs_schemas(schema: str, files: list[Path]) -> None:
    proc = subprocess.run(
        [linter("check-jsonschema"), "--builtin-schema", schema, *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- .ci/image_check.py as root (here) and as a hosted runner's job (uid 1001, group 121) ------

#: How a hosted runner's job runs: uid 1001, group 121, no other groups.
AS_RUNNER = ("setpriv", "--reuid", "1001", "--regid", "121", "--clear-groups")
IMAGE_CHECK_AS_RUNNER = """
import os, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import image_check as ic
root = Path(tempfile.mkdtemp(prefix="lkeval-image-check-test-"))
runner = ic.Runner(ic.Engine("true", "unused"), root / "run")
assert runner.owner == (os.geteuid(), os.getegid()) == (1001, 121), runner.owner
reports = runner.workspace / "agent" / "lkeval-results"
reports.mkdir(mode=0o755)
(reports / "results.json").write_text("{}")
os.chmod(reports / "results.json", 0o644)
(runner.home / ".cache").mkdir()
ic.check_handed_back(runner, [reports / "results.json"])
print("owner", *runner.owner)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="setpriv needs root to become uid 1001")
def test_image_check_runs_as_a_hosted_runners_job_without_chown() -> None:
    """A hosted runner's job is uid 1001, group 121, and cannot chown: the check then is the
    runner user itself (it set up the runner folders and expects them handed back to it)."""
    assert shutil.which("setpriv"), "util-linux's setpriv"
    proc = subprocess.run(
        [*AS_RUNNER, sys.executable, "-c", IMAGE_CHECK_AS_RUNNER, str(ROOT / ".ci")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HOME": "/tmp"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["owner", "1001", "121"]


@pytest.mark.skipif(os.geteuid() != 0, reason="plays the runner's user by chown, as root")
def test_image_check_as_root_plays_uid_1001_and_finds_root_owned_leftovers(
    tmp_path: Path,
) -> None:
    sys.path.insert(0, str(ROOT / ".ci"))
    try:
        import image_check as ic
    finally:
        sys.path.remove(str(ROOT / ".ci"))
    runner = ic.Runner(ic.Engine("true", "unused"), tmp_path / "run")
    assert runner.owner == (1001, 1001)
    assert runner.home.stat().st_uid == runner.workspace.stat().st_uid == 1001
    ic.check_handed_back(runner, [])
    (runner.home / ".cache").mkdir()  # written by the container (root) and not handed back
    with pytest.raises(ic.CheckFailed, match=r"\$HOME: .cache is owned by 0:0, not 1001:1001"):
        ic.check_handed_back(runner, [])


@pytest.mark.parametrize("public", [True, False])
def test_anonymous_pull_fails_the_release_with_the_fix_when_the_image_is_private(
    tmp_path: Path, public: bool
) -> None:
    """A docker that answers as ghcr.io does: with no credentials, a private package's pull
    is refused. The check must use no credentials and say how to make the package public."""
    log = tmp_path / "docker.log"
    fake = tmp_path / "bin" / "docker"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$* config=$(ls -A "$DOCKER_CONFIG" | wc -l)" >> {log}\n'
        f'[ "$1" = pull ] && exit {0 if public else 1}\n'
        "exit 0\n"
    )
    fake.chmod(0o755)
    proc = subprocess.run(
        [str(ROOT / ".ci" / "anonymous-pull"), DIGEST, "acme"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"},
    )
    pulls = [line for line in log.read_text().splitlines() if line.startswith("pull")]
    assert pulls == [f"pull --quiet {DIGEST} config=0"], "by digest, with no credentials"
    if public:
        assert proc.returncode == 0 and "anyone can pull" in proc.stdout
    else:
        assert proc.returncode == 1
        assert proc.stdout.startswith("::error title=The image is not public::")
        assert "https://github.com/users/acme/packages/container/lk-eval/settings" in proc.stdout
        assert "no tag has moved" in proc.stdout
