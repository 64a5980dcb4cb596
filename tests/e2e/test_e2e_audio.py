"""End to end in audio mode: the real CLI, the voice variant of the example hotel agent
(``tests/agents/voice_hotel_agent.py``: LiveKit Inference STT and TTS, or the openai plugin's),
lk-eval's local speech server (``--speech local``, oracle STT) and the local LLM.

Audio turns run in real time (the caller's line, the agent's turn detection, its spoken reply
played out), so these runs are few and each is asserted from several sides. Nothing here is
timed: figures are checked for presence and consistency, never against a bound.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import yaml
from conftest import (
    HOTEL,
    TEST_AGENTS,
    assert_all_gone,
    hotel_env,
    lkeval_process,
    read_json,
    run_argv,
    run_lkeval,
)

from lkeval.testing.llm_server import LLMServer

pytestmark = pytest.mark.e2e

VOICE_AGENT = TEST_AGENTS / "voice_hotel_agent.py"
#: The hotel's rules, and a long answer to cut into (~10 s of speech).
LONG_ANSWER = (
    "Hotel Example has a rooftop pool, a garden restaurant that serves breakfast from seven, "
    "a quiet library on the second floor, free bicycles for guests, and a spa in the basement "
    "that is open until ten in the evening every day of the week."
)


@pytest.fixture
def voice_llm() -> Iterator[LLMServer]:
    rules = yaml.safe_load((HOTEL / "llm_rules.yaml").read_text())["rules"]
    long = {"model": "hotel-agent", "last_user": "tell me about", "text": LONG_ANSWER}
    stop = {"model": "hotel-agent", "last_user": "sorry", "text": "Of course, go ahead."}
    with LLMServer([long, stop, *rules], default_text="Sorry?") as server:
        yield server


def _write(tmp_path: Path, scenarios: list[dict]) -> Path:
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"name": "Voice hotel", "scenarios": scenarios}))
    return path


def _attempt(results: dict, scenario_id: str) -> dict:
    (scenario,) = [s for s in results["scenarios"] if s["scenario_id"] == scenario_id]
    return scenario["attempts"][0]


VETO = {
    "id": "SCN_voiceVeto",
    "label": "Books for the wrong guest by voice",
    "mode": "audio",
    "impair": "noise=30dB,seed=5",  # the scenario's own line: quiet noise, heard all the same
    "userdata": {"guest": "Grace", "expected_booking": {"guest": "Grace", "room_type": "double",
                                                        "nights": 2}},
    "turns": [
        {"expect": [{"contains": {"message": {"contains": "welcome"}}}]},
        {
            "user": "Is a double room free for two nights?",
            "expect": [
                {"heard": {"contains": "double room", "max_wer": 0}},
                {"contains": {"function_call": {"name": "check_availability"}}},
            ],
        },
    ],
}  # fmt: skip


@pytest.mark.parametrize(
    "speech", ["inference", pytest.param("openai", marks=pytest.mark.exhaustive)]
)
def test_a_voice_agent_hears_what_the_caller_said_and_its_veto_comes_back(
    tmp_path: Path, voice_llm: LLMServer, speech: str
) -> None:
    """The greeting arrives as audio; what the agent's STT heard is the caller's line (the
    oracle); every turn has its first-audio latency; the agent's own veto comes back."""
    scenarios = _write(tmp_path, [VETO])
    results_path = tmp_path / "out" / "results.json"
    proc = run_lkeval(
        [*run_argv(VOICE_AGENT, scenarios, results_path), "--speech", "local"],
        hotel_env(voice_llm, VOICE_HOTEL_SPEECH=speech),
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    results = read_json(results_path)
    meta = results["metadata"]
    assert meta["conversation_mode"] == "audio"
    assert "oracle STT: recognition not tested" in meta["speech"]
    assert meta["inference_class"] == "agent"  # an audio simulation is not pinned low
    attempt = _attempt(results, "SCN_voiceVeto")
    call = attempt["call"]
    assert call["greeting_audio_s"] and call["greeting_audio_s"] > 0.5, call
    assert call["caller_lines"] == 1 and call["agent_replies"] >= 2
    # the scenario's impair: played (no --impair on the run), the attempt's seed recorded
    assert call["line"].startswith("noise=30dB,seed=") and "SNR" in call["line"], call["line"]
    assert "seed=5:" not in call["line"]  # the attempt's own seed, derived from 5
    # the call for a person: a stereo WAV and its timeline, beside the agent's log
    assert Path(call["recording"]).suffix == ".wav" and Path(call["recording"]).stat().st_size
    assert Path(call["recording"]).parent == Path(attempt["log_path"]).parent
    assert "<svg" in Path(call["timeline"]).read_text()
    (turn,) = attempt["turns"]
    assert turn["mode"] == "audio"
    assert turn["heard"] == turn["said"] == "Is a double room free for two nights?"
    assert turn["wer"] == 0.0
    assert turn["first_audio_ms"] is not None and turn["first_audio_ms"] > 0
    user = [i for i in attempt["transcript"] if i["kind"] == "message" and i["role"] == "user"]
    assert [(u["text"], u["said"]) for u in user] == [(turn["said"], turn["said"])]
    assert [e["passed"] for e in attempt["expectations"]] == [True, True, True]
    assert attempt["agent_check"].startswith("vetoed: expected booking"), attempt["agent_check"]
    assert attempt["status"] == "failed" and "agent veto" in attempt["reason"]


@pytest.mark.exhaustive
def test_a_barge_in_is_recorded_as_an_interruption(tmp_path: Path, voice_llm: LLMServer) -> None:
    """A line spoken 1.5 s into a ~10 s reply stops the agent: the speaker saw the clear, the
    turn says the caller's line cut in and how soon the agent stopped, and the barge_in check
    passes; an audio turn and a typed one mix in one call."""
    scenario = {
        "id": "SCN_bargeIn",
        "label": "Cuts into a long answer",
        "mode": "audio",
        "turns": [
            {"user": "Please tell me about the hotel.", "expect": [{"heard": {"max_wer": 0}}]},
            {
                "user": "Sorry, one more question.",
                "interrupt_after": "1.5s",
                "expect": [{"barge_in": {"stopped_within": "20s"}}],
            },
            {"user": "Is a double room free for two nights?", "mode": "text",
             "expect": [{"contains": {"function_call": {"name": "check_availability"}}}]},
        ],
    }  # fmt: skip
    results_path = tmp_path / "out" / "results.json"
    proc = run_lkeval(
        [*run_argv(VOICE_AGENT, _write(tmp_path, [scenario]), results_path), "--speech", "local"],
        hotel_env(voice_llm),
        timeout=300,
    )
    results = read_json(results_path)
    attempt = _attempt(results, "SCN_bargeIn")
    assert proc.returncode == 0, (proc.stdout, attempt["reason"], attempt["turns"])
    first, cut_in, typed = attempt["turns"]
    assert first["first_audio_ms"] is not None and cut_in["first_audio_ms"] is not None
    assert cut_in["interrupted_agent"] is True and cut_in["agent_stopped_ms"] > 0
    assert attempt["call"]["interrupted_replies"] >= 1
    assert typed["mode"] == "text"
    interrupted = [i for i in attempt["transcript"] if i.get("interrupted")]
    assert interrupted and interrupted[0]["role"] == "assistant"


@pytest.mark.exhaustive
def test_the_simulated_caller_speaks_and_the_judge_sees_what_the_agent_heard(
    tmp_path: Path, voice_llm: LLMServer
) -> None:
    """An LLM caller's lines are spoken too: every turn of its call is an audio turn whose heard
    line is what the caller said (oracle), and the call ends as the caller decides."""
    scenario = {
        "id": "SCN_voiceAda",
        "label": "Ada books a double room on the phone",
        "mode": "audio",
        "instructions": "You are Ada. Book a double room for two nights.",
        "agent_expectations": "The agent books a double room for Ada.",
        "userdata": {"guest": "Ada", "expected_booking": {"guest": "Ada", "room_type": "double",
                                                          "nights": 2}},
    }  # fmt: skip
    results_path = tmp_path / "out" / "results.json"
    proc = run_lkeval(
        [
            *run_argv(VOICE_AGENT, _write(tmp_path, [scenario]), results_path),
            *("--speech", "local", "--caller-model", "caller", "--judge-model", "judge"),
        ],
        hotel_env(voice_llm),
        timeout=300,
    )
    attempt = _attempt(read_json(results_path), "SCN_voiceAda")
    assert proc.returncode == 0, (proc.stdout, attempt["reason"], attempt["transcript"])
    assert attempt["end_reason"].startswith("the simulated user ended the call")
    turns = attempt["turns"]
    assert len(turns) >= 3 and {t["mode"] for t in turns} == {"audio"}
    assert all(t["heard"] == t["said"] and t["first_audio_ms"] for t in turns), turns
    calls = [i["name"] for i in attempt["transcript"] if i["kind"] == "function_call"]
    assert "book_room" in calls and attempt["agent_check"] == "passed (no veto)"


@pytest.mark.exhaustive
def test_ctrl_c_in_an_audio_call_ends_the_run_with_what_it_has(
    tmp_path: Path, voice_llm: LLMServer
) -> None:
    """SIGINT while the agent speaks a long reply: exit 130, the results written with the
    attempt interrupted and its call so far (recording included), nothing left running."""
    scenario = {
        "id": "SCN_longCall",
        "label": "A long answer, interrupted by Ctrl-C",
        "mode": "audio",
        "turns": [
            {"user": "Please tell me about the hotel.", "expect": [{"heard": {"max_wer": 0}}]},
            {"user": "Thank you, goodbye."},
        ],
    }
    results_path = tmp_path / "out" / "results.json"
    argv = [*run_argv(VOICE_AGENT, _write(tmp_path, [scenario]), results_path), "--speech", "local"]
    with lkeval_process(argv, hotel_env(voice_llm)) as cli:
        log = results_path.parent / "logs" / "SCN_longCall.log"
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and cli.poll() is None:  # the reply is being spoken
            if any(
                r.body.get("messages") and "tell me about" in str(r.body)
                for r in voice_llm.requests
            ):
                break
            time.sleep(0.2)
        time.sleep(2.0)
        tree = [p.pid for p in psutil.Process(cli.pid).children(recursive=True)]
        assert cli.poll() is None and tree, "the call ended before the signal"
        cli.send_signal(signal.SIGINT)
        out, _ = cli.communicate(timeout=120)
    assert cli.returncode == 130, out
    assert_all_gone(tree)
    attempt = _attempt(read_json(results_path), "SCN_longCall")
    assert attempt["status"] == "error" and "interrupted" in attempt["reason"]
    assert attempt["call"] is not None and attempt["call"]["caller_lines"] >= 1
    assert Path(attempt["call"]["recording"]).is_file()
    assert not log.with_suffix(".files").exists() or not any(log.with_suffix(".files").iterdir())


@pytest.mark.exhaustive
def test_a_simulated_caller_who_barges_in_cuts_the_agents_reply(tmp_path: Path) -> None:
    """``caller_interrupt_after: 1.5s``: the simulated caller's second line starts 1.5 s into
    the agent's ~10 s answer (as soon as the caller has it); the agent stops, the turn says
    the line cut in, and the caller's last line (it hangs up) waits for the full reply."""
    rules = yaml.safe_load((HOTEL / "llm_rules.yaml").read_text())["rules"]
    callers = [
        {"model": "caller", "last_user": "welcome", "times": 1,
         "text": "Please tell me about the hotel."},
        {"model": "caller", "times": 1, "text": "Sorry, is a double room free?"},
        {"model": "caller", "text": "Thanks, bye!",
         "tool_calls": [{"name": "end_call", "arguments": {"reason": "done"}}]},
    ]  # fmt: skip
    long = {"model": "hotel-agent", "last_user": "tell me about", "text": LONG_ANSWER}
    stop = {"model": "hotel-agent", "last_user": "sorry", "text": "Of course, go ahead."}
    scenario = {
        "id": "SCN_callerBargesIn",
        "label": "A caller who does not wait",
        "instructions": "You ask about the hotel, then cut in with a question.",
        "agent_expectations": "The agent answers the caller.",
        "caller_interrupt_after": "1.5s",  # makes the call an audio one
    }
    results_path = tmp_path / "out" / "results.json"
    with LLMServer([*callers, long, stop, *rules], default_text="Sorry?") as llm:
        proc = run_lkeval(
            [
                *run_argv(VOICE_AGENT, _write(tmp_path, [scenario]), results_path),
                *("--speech", "local", "--caller-model", "caller", "--judge-model", "judge"),
            ],
            hotel_env(llm),
            timeout=300,
        )
    (scenario_result,) = read_json(results_path)["scenarios"]
    assert scenario_result["attempts"], proc.stdout + proc.stderr
    attempt = scenario_result["attempts"][0]
    assert attempt["status"] != "error", (proc.stdout, attempt["reason"])
    turns = attempt["turns"]
    assert [t["said"] for t in turns] == [
        "Please tell me about the hotel.",
        "Sorry, is a double room free?",
        "Thanks, bye!",
    ], turns
    asked, cut_in, bye = turns
    assert not asked["interrupted_agent"] and not bye["interrupted_agent"]
    assert cut_in["interrupted_agent"] is True and cut_in["agent_stopped_ms"] > 0, cut_in
    assert attempt["call"]["interrupted_replies"] >= 1
    interrupted = [i for i in attempt["transcript"] if i.get("interrupted")]
    assert interrupted and interrupted[0]["role"] == "assistant"


@pytest.mark.exhaustive
def test_listen_records_what_a_caller_heard_of_each_reply(
    tmp_path: Path, voice_llm: LLMServer
) -> None:
    """``--listen openai:whisper-1``: once the call is over, each spoken turn's played reply is
    sent to the listener's ``/audio/transcriptions`` (here a second local speech server, whose
    oracle is told what to answer: it answers only for audio with speech in it), and the text
    is the turn's ``agent_heard``; the run's conditions name the listener."""
    import json
    import subprocess
    import sys
    import urllib.request

    listened = "The listener heard the agent."
    server = subprocess.Popen(
        [sys.executable, "-m", "lkeval.testing.speech_server"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().split()[1])
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/_control/listen/expect",
            data=json.dumps({"text": listened}).encode(),
            method="POST",
        )
        urllib.request.urlopen(request, timeout=30).read()
        scenario = {**VETO, "id": "SCN_listen", "userdata": {}}
        results_path = tmp_path / "out" / "results.json"
        proc = run_lkeval(
            [
                *run_argv(VOICE_AGENT, _write(tmp_path, [scenario]), results_path),
                *("--speech", "local", "--listen", "openai:whisper-1"),
            ],
            hotel_env(voice_llm, LKEVAL_LISTEN_BASE_URL=f"http://127.0.0.1:{port}/o/listen/v1"),
            timeout=300,
        )
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
    results = read_json(results_path)
    attempt = _attempt(results, "SCN_listen")
    assert attempt["status"] != "error", (proc.stdout, attempt["reason"])
    (turn,) = attempt["turns"]
    assert turn["agent_heard"] == listened, turn
    assert "openai:whisper-1 (--listen)" in results["metadata"]["speech"]
