"""LiveKit's own hotel receptionist (livekit/agents ``examples/hotel_receptionist``), unmodified,
in audio mode through the real CLI, in its own interpreter (``--python``).

Its source is not part of this repository (and must not be copied in): point
``LKEVAL_HOTEL_RECEPTIONIST`` at a checkout of that folder with a virtual environment in
``.venv`` holding its requirements (docs/audio.md, "LiveKit's hotel receptionist"). Without it
the test is skipped and says so. Its LLM, STT and TTS are LiveKit Inference model strings:
``--speech local`` serves the speech and forwards its LLM calls to the local LLM server given as
its ``LIVEKIT_INFERENCE_URL``. Real-time audio: ``make test-exhaustive``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from conftest import clean_env, read_json, run_argv, run_lkeval

from lkeval.testing.llm_server import LLMServer

pytestmark = [pytest.mark.e2e, pytest.mark.exhaustive]

CHECKOUT_ENV = "LKEVAL_HOTEL_RECEPTIONIST"
LINE = "Hi, I would like to book a room for next month."
REPLY = "Of course. Which dates would you like to stay with us?"


def receptionist() -> tuple[Path, Path]:
    """(its agent.py, its venv's python), or a skip that says what is missing."""
    where = os.environ.get(CHECKOUT_ENV, "")
    if not where:
        pytest.skip(
            f"{CHECKOUT_ENV} is not set: LiveKit's hotel_receptionist is not on this machine "
            "(a checkout of livekit/agents examples/hotel_receptionist with its .venv; "
            "docs/audio.md)"
        )
    agent, python = Path(where) / "agent.py", Path(where) / ".venv" / "bin" / "python"
    for needed in (agent, python):
        if not needed.exists():
            pytest.skip(f"{CHECKOUT_ENV}={where}: no {needed} (docs/audio.md)")
    return agent, python


def test_livekit_hotel_receptionist_runs_unmodified_in_audio_mode(tmp_path: Path) -> None:
    agent, python = receptionist()
    scenarios = tmp_path / "scenarios.yaml"
    turn = {"user": LINE, "expect": [{"heard": {"max_wer": 0}}]}
    scenario = {"id": "SCN_receptionist", "label": "Asks for a room", "turns": [turn]}
    scenarios.write_text(yaml.safe_dump({"name": "Receptionist", "scenarios": [scenario]}))
    results_path = tmp_path / "out" / "results.json"
    argv = [*run_argv(agent, scenarios, results_path), "--python", str(python)]
    argv += ["--mode", "audio", "--speech", "local"]
    with LLMServer([], default_text=REPLY) as llm:
        env = clean_env(
            LIVEKIT_INFERENCE_URL=llm.base_url,
            LIVEKIT_API_KEY="local-test-key",
            LIVEKIT_API_SECRET="local-test-secret-not-a-secret",
        )
        proc = run_lkeval(argv, env, timeout=420, cwd=agent.parent)
    assert results_path.exists(), proc.stdout + proc.stderr
    results = read_json(results_path)
    assert results["metadata"]["conversation_mode"] == "audio"
    (attempt,) = results["scenarios"][0]["attempts"]
    assert attempt["status"] == "passed", (attempt["reason"], proc.stdout[-3000:])
    (spoken,) = [t for t in attempt["turns"] if t["mode"] == "audio"]
    assert spoken["heard"] == spoken["said"] == LINE
    assert spoken["first_audio_ms"] is not None and spoken["first_audio_ms"] > 0
    assert attempt["call"]["agent_replies"] >= 1 and attempt["call"]["agent_audio_s"] > 0
    assert Path(attempt["call"]["recording"]).stat().st_size > 0
