"""Shared test plumbing: the local LLM server, the CLI as a subprocess, a clean environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lkeval.testing.llm_server import LLMServer

ROOT = Path(__file__).resolve().parent.parent
HOTEL = ROOT / "examples" / "hotel"
TEST_AGENTS = Path(__file__).resolve().parent / "agents"
TEST_DATA = Path(__file__).resolve().parent / "data"


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for a child lkeval: no GitHub Actions context unless a test sets one,
    no real LLM endpoints or keys from the developer's shell."""
    drop = ("GITHUB_", "INPUT_", "OPENAI_", "LKEVAL_", "LIVEKIT_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop) and k != "CI"}
    env.update(extra)
    return env


def fake_lkeval(where: Path, main: str) -> Path:
    """A stand-in ``lkeval`` package under ``where`` (for ``PYTHONPATH``): ``python -m lkeval``
    runs ``main``, while every other module (``lkeval.text``, which the entrypoint masks with)
    is the real one, as in the image."""
    import lkeval

    package = where / "lkeval"
    package.mkdir(parents=True, exist_ok=True)
    real = str(Path(lkeval.__file__).parent)
    (package / "__init__.py").write_text(f"__path__.append({real!r})\n")
    (package / "__main__.py").write_text(main)
    return where


def hotel_env(llm: LLMServer, **extra: str) -> dict[str, str]:
    """Environment that points the example agent at the local LLM."""
    return clean_env(
        OPENAI_BASE_URL=llm.base_url,
        OPENAI_API_KEY="test-key-not-secret",
        HOTEL_AGENT_MODEL="hotel-agent",
        **extra,
    )


def run_argv(agent: Path | str, scenarios: Path | str, results: Path | str) -> list[str]:
    """``lkeval run`` with its three everyday flags and one attempt per scenario (``--repeat
    1``: the sequential test, the default, has its own tests); a test appends what it is
    about."""
    return [
        "run", "--agent", str(agent), "--scenarios", str(scenarios), "--results", str(results),
        "--repeat", "1",
    ]  # fmt: skip


def run_lkeval(
    args: list[str], env: dict[str, str], timeout: float = 240, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a child process, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "lkeval", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture
def hotel_llm() -> Iterator[LLMServer]:
    with LLMServer.from_file(HOTEL / "llm_rules.yaml") as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_process_masker() -> Iterator[None]:
    """Secrets registered by one in-process test (a token, ``--env`` values) stay its own."""
    from lkeval.text.masking import reset_process_masker

    reset_process_masker()
    yield
    reset_process_masker()
