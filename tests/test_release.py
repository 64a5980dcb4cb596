"""The release: the workflow that pins action.yml to a pushed image, and the linters that
check action.yml and every workflow the way GitHub will read them."""

from __future__ import annotations

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
