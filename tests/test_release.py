"""The release: the workflow that pins action.yml to a pushed image, and the linters that
check action.yml and every workflow the way GitHub will read them."""

from __future__ import annotations

import os
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
    assert wf["permissions"] == {"contents": "write", "packages": "write"}
    (job,) = wf["jobs"].values()
    scripts = [str(step.get("run", "")) for step in job["steps"]]
    order = ["docker build", ".ci/image-check", "docker push", ".ci/pin-image"]
    at = [next(n for n, s in enumerate(scripts) if word in s) for word in order]
    assert at == sorted(at), "build, test the image, push, then pin"
    build = next(s for s in scripts if "docker build" in s)
    for arg in ("VERSION=", "REVISION=$GITHUB_SHA", "SOURCE="):
        assert arg in build
    assert not any("${{" in s for s in scripts), "expressions go through env:, not the script"


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
