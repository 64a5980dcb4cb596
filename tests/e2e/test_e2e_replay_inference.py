"""Record and replay of an agent whose LLM is LiveKit Inference (``livekit.agents.inference.LLM``,
from a model string), through the real CLI and real agent processes.

The front-desk test agent asks LiveKit Inference for ``"openai/gpt-4.1-mini"``; its gateway is
the scripted server on 127.0.0.1 (``LIVEKIT_INFERENCE_URL``, with any LiveKit key and secret,
from which livekit signs a JWT per request). Recorded with the server up, then replayed with it
stopped and no LiveKit key in the environment: the same transcript, checks and verdict, and
the cassette holds no credential (the JWT is a request header, never recorded).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import TEST_AGENTS, clean_env, read_json, run_argv, run_lkeval
from replay_agent import conversation

from lkeval.testing.llm_server import LLMServer

pytestmark = pytest.mark.e2e

FRONTDESK = TEST_AGENTS / "frontdesk"
SCENARIO = {
    "id": "book-ada",
    "label": "Books Ada",
    "turns": [
        {
            "user": "please book for Ada",
            "expect": [
                {"function_call": {"name": "book_appointment", "arguments": {"name": "Ada"}}},
                {"function_call_output": {"is_error": False}},
                {"message": {"contains": "Anything else?"}},
            ],
        }
    ],
}
SECRET = "devsecret-not-a-secret"


def _run(tmp_path: Path, name: str, mode: str, env: dict[str, str]) -> tuple[int, Any]:
    results = tmp_path / name / "results.json"
    argv = run_argv(FRONTDESK / "agent.py", tmp_path / "scenarios.yaml", results)
    argv += ["--no-github", "--cassettes", str(tmp_path / "cassettes"), "--cassette-mode", mode]
    proc = run_lkeval(argv, env)
    assert results.exists(), proc.stdout + proc.stderr
    return proc.returncode, read_json(results)


def test_an_agent_on_livekit_inference_replays_with_its_gateway_stopped(tmp_path: Path) -> None:
    (tmp_path / "scenarios.yaml").write_text(
        yaml.safe_dump({"name": "Front desk", "scenarios": [SCENARIO]}), encoding="utf-8"
    )
    with LLMServer.from_file(FRONTDESK / "llm_rules.yaml") as llm:
        gateway = {"LIVEKIT_INFERENCE_URL": llm.base_url}
        env = clean_env(**gateway, LIVEKIT_API_KEY="devkey", LIVEKIT_API_SECRET=SECRET)
        code, recorded = _run(tmp_path, "record", "record", env)
        calls = len(llm.requests)
    assert code == 0, recorded
    assert calls >= 2 and {r.body.get("model") for r in llm.requests} == {"openai/gpt-4.1-mini"}
    assert all((r.authorization or "").count(".") == 2 for r in llm.requests), "a signed JWT"
    (attempt,) = [a for s in recorded["scenarios"] for a in s["attempts"]]
    assert attempt["replay"]["mode"] == "recorded"

    cassette = (tmp_path / "cassettes" / "book-ada.json").read_text(encoding="utf-8")
    agent_calls = json.loads(cassette)["exchanges"]["agent"]
    chat = [c for c in agent_calls if c["request"]["url"].endswith("/chat/completions")]
    base_url = gateway["LIVEKIT_INFERENCE_URL"]
    assert len(chat) == calls and all(c["request"]["url"].startswith(base_url) for c in chat)
    assert "text/event-stream" in {c["response"]["headers"].get("content-type") for c in chat}
    assert SECRET not in cassette and "devkey" not in cassette
    assert not re.search(r"eyJ[\w-]+\.[\w-]+\.", cassette), "a JWT reached the cassette"

    # the gateway is stopped (its port closed) and no LiveKit key is left
    code_again, replayed = _run(tmp_path, "replay", "replay", clean_env(**gateway))
    assert code_again == code == 0
    assert conversation(replayed) == conversation(recorded)
    (again,) = [a for s in replayed["scenarios"] for a in s["attempts"]]
    assert again["replay"]["mode"] == "replayed", again["replay"]
    assert again["replay"]["calls_live"] == 0
    assert again["replay"]["calls_replayed"] == len(agent_calls)
