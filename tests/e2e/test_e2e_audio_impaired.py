"""End to end: an impairment changes the audio the agent receives and, with a real recognizer
(``--speech local:pocketsphinx``), what the agent hears.

The same line is spoken three times to the voice hotel agent
(``tests/agents/voice_hotel_agent.py``, LiveKit Inference STT through lk-eval's local speech
server): clean, through ``noise=10dB`` and through ``loss=15%``; pocketsphinx recognizes
whatever audio the agent's STT sends it. The run is played twice with the same seeds: the same
impairments are made (byte for byte per line: tests/audio/test_impair.py), and each time the
impaired lines are heard otherwise than the clean one. The words pocketsphinx makes of an
impaired line are not asserted equal across runs: for the lossy line they were seen to differ
(the recognizer is fed as the agent's STT streams, and that timing varies). Noise and loss
together are not used: lost frames are digital silence inside the noise, and the local server's
endpointer then never hears the speech end (docs/audio.md says so).

Real-time calls and pocketsphinx (~0.6 CPU-s per audio second): ``make test-exhaustive``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from conftest import HOTEL, TEST_AGENTS, hotel_env, read_json, run_argv, run_lkeval

from lkeval.testing.llm_server import LLMServer

pytestmark = [pytest.mark.e2e, pytest.mark.exhaustive]

pytest.importorskip("pocketsphinx", reason="the speech extra: pip install 'lk-eval[speech]'")

VOICE_AGENT = TEST_AGENTS / "voice_hotel_agent.py"
LINE = "Is a double room free for two nights?"
NOISE, LOSS = "noise=10dB,seed=3", "loss=15%,seed=3"


def scenario(scenario_id: str, impair: str | None) -> dict[str, object]:
    spoken: dict[str, object] = {
        "id": scenario_id,
        "label": scenario_id,
        "mode": "audio",
        # the greeting (a check, so the scenario has one), then the line
        "turns": [{"expect": [{"contains": {"message": {"contains": "welcome"}}}]}, {"user": LINE}],
    }
    return {**spoken, "impair": impair} if impair else spoken


def play(tmp_path: Path, llm: LLMServer, name: str) -> dict[str, dict]:
    """One run of both calls: each scenario's attempt, by id."""
    scenarios = tmp_path / f"{name}.yaml"
    calls = [
        scenario("SCN_clean", None),
        scenario("SCN_noisy", NOISE),
        scenario("SCN_lossy", LOSS),
    ]
    scenarios.write_text(yaml.safe_dump({"name": "Impaired line", "scenarios": calls}))
    results_path = tmp_path / name / "results.json"
    argv = [*run_argv(VOICE_AGENT, scenarios, results_path), "--speech", "local:pocketsphinx"]
    argv += ["--concurrency", "3", "--turn-timeout", "60"]
    proc = run_lkeval(argv, hotel_env(llm), timeout=420)
    assert results_path.exists(), proc.stdout + proc.stderr
    results = read_json(results_path)
    assert "pocketsphinx STT" in results["metadata"]["speech"]
    return {s["scenario_id"]: s["attempts"][0] for s in results["scenarios"]}


def heard(attempt: dict) -> str:
    (turn,) = [t for t in attempt["turns"] if t["mode"] == "audio"]
    assert turn["said"] == LINE, turn
    return str(turn["heard"] or "")


def test_an_impaired_line_reaches_the_agent_changed_and_is_heard_differently(
    tmp_path: Path,
) -> None:
    rules = yaml.safe_load((HOTEL / "llm_rules.yaml").read_text())["rules"]
    with LLMServer(rules, default_text="Sorry, could you say that again?") as llm:
        first = play(tmp_path, llm, "first")
        again = play(tmp_path, llm, "again")
    clean, noisy, lossy = (first[k] for k in ("SCN_clean", "SCN_noisy", "SCN_lossy"))
    assert clean["call"]["line"] == ""  # nothing done to the clean line
    # what was done to the line the agent received, measured as it went out
    noise = re.fullmatch(
        r"noise=10dB,seed=\d+: 0 of \d+ frames lost, SNR (-?[\d.]+) dB", noisy["call"]["line"]
    )
    assert noise and float(noise[1]) == pytest.approx(10.0, abs=1.0), noisy["call"]["line"]
    loss = re.fullmatch(
        r"loss=15%,burst=40ms,seed=\d+: (\d+) of (\d+) frames lost", lossy["call"]["line"]
    )
    assert loss and 0.05 < int(loss[1]) / int(loss[2]) < 0.3, lossy["call"]["line"]
    # what the agent's STT heard: a real recognizer, so the noise and the gaps change it
    for run in (first, again):
        assert heard(run["SCN_clean"]), run["SCN_clean"]["turns"]
        assert heard(run["SCN_noisy"]) != heard(run["SCN_clean"])
        assert heard(run["SCN_lossy"]) != heard(run["SCN_clean"])
    # the same seeds: the same impairments, from the same derived seed per scenario
    for key, attempt in first.items():
        assert again[key]["call"]["line"].split(":")[0] == attempt["call"]["line"].split(":")[0]
