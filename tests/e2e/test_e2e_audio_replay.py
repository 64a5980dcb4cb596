"""A replayed audio call passes only on what its agent heard live (``--cassettes`` in audio mode).

The speech WebSockets are not recorded: a replayed audio attempt speaks and listens live, and
only the agent's HTTP calls (its LLM) come from the cassette. The recording is made with
``--speech local`` (the agent's LLM calls pass through the local speech server, on a random
port and a per-attempt prefix) on the voice hotel agent: two scenarios, each asking for a
double room and expecting the availability check. Then one scenario's caller says something
else, so what the agent's STT hears is not what it heard when recorded. In ``auto`` that
attempt goes live and fails on its live answer; in ``replay`` it is an error; neither keeps the
recorded pass. The other scenario replays in full each time: the server's port and prefix do
not stop a replay from matching, so the divergence above is the heard line's.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from conftest import HOTEL, TEST_AGENTS, hotel_env, read_json, run_argv, run_lkeval

from lkeval.testing.llm_server import LLMServer

# A real-time call recorded once and replayed twice (~2 min): make test-exhaustive, in CI.
pytestmark = [pytest.mark.e2e, pytest.mark.exhaustive]

VOICE_AGENT = TEST_AGENTS / "voice_hotel_agent.py"
ASKS = "Is a double room free for two nights?"
OTHER = "What is the weather like today?"


def _scenario(scenario_id: str, line: str) -> dict:
    return {
        "id": scenario_id,
        "label": scenario_id,
        "mode": "audio",
        "turns": [
            {
                "user": line,
                "expect": [{"contains": {"function_call": {"name": "check_availability"}}}],
            }
        ],
    }


def _run(tmp_path: Path, llm: LLMServer, name: str, line: str, *flags: str) -> dict:
    scenarios = tmp_path / f"{name}.yaml"
    both = [_scenario("SCN_same", ASKS), _scenario("SCN_heard", line)]
    scenarios.write_text(yaml.safe_dump({"name": "Voice replay", "scenarios": both}))
    results = tmp_path / name / "results.json"
    argv = [*run_argv(VOICE_AGENT, scenarios, results), "--speech", "local", "--no-github"]
    proc = run_lkeval([*argv, *flags], hotel_env(llm), timeout=420, cwd=tmp_path)
    assert results.exists(), proc.stdout + proc.stderr
    return {s["scenario_id"]: s["attempts"][0] for s in read_json(results)["scenarios"]}


def test_a_replayed_audio_call_never_passes_on_a_line_it_did_not_hear(tmp_path: Path) -> None:
    rules = yaml.safe_load((HOTEL / "llm_rules.yaml").read_text())
    with LLMServer(rules["rules"], default_text="Sorry?") as llm:
        recorded = _run(tmp_path, llm, "record", ASKS, "--cassettes", str(tmp_path / "rec"))
        assert [a["status"] for a in recorded.values()] == ["passed", "passed"], recorded
        for mode in ("auto", "replay"):
            cassettes = tmp_path / f"c-{mode}"
            shutil.copytree(tmp_path / "rec", cassettes)
            flags = ("--cassettes", str(cassettes), "--cassette-mode", mode)
            got = _run(tmp_path, llm, mode, OTHER, *flags)
            same, heard = got["SCN_same"], got["SCN_heard"]
            # the unchanged call replays the agent's calls in full, through another port/prefix
            assert same["replay"]["mode"] == "replayed", (mode, same["replay"])
            assert same["status"] == "passed" and same["replay"]["calls_live"] == 0
            # the changed line is what the agent heard; the recording's answer is not kept
            assert heard["turns"][0]["heard"] == OTHER, heard["turns"]
            assert heard["replay"]["mode"] != "replayed", heard["replay"]
            if mode == "auto":
                assert heard["replay"]["calls_live"] > 0, heard["replay"]
                assert heard["status"] == "failed", (heard["status"], heard["reason"])
                calls = [i for i in heard["transcript"] if i["kind"] == "function_call"]
                assert calls == [], calls
            else:
                assert heard["status"] == "error" and "replay miss" in heard["reason"], heard
