"""End to end: the real CLI boots real agents through the LiveKit console and the real protocol.

Each lkeval run here boots agent processes (~2.5 CPU-s each), so the checks are grouped into
few runs and every run is asserted from several sides.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from conftest import (
    HOTEL,
    TEST_AGENTS,
    assert_all_gone,
    clean_env,
    hotel_env,
    read_json,
    run_argv,
    run_lkeval,
)
from livekit.agents import __version__ as livekit_agents_version

from lkeval.testing.llm_server import LLMServer

pytestmark = pytest.mark.e2e


LIVEKIT_AGENTS = tuple(int(part) for part in livekit_agents_version.split(".")[:2])


def _scenarios_file(tmp_path: Path, scenarios: list[dict], name: str = "Tests") -> Path:
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"name": name, "scenarios": scenarios}, sort_keys=False))
    return path


def _by_id(results: dict) -> dict[str, dict]:
    return {s["scenario_id"]: s for s in results["scenarios"]}


@pytest.mark.smoke
def test_hotel_scripted_scenarios(tmp_path: Path, hotel_llm: LLMServer) -> None:
    example = yaml.safe_load((HOTEL / "scenarios.yaml").read_text())
    scripted = [s for s in example["scenarios"] if "turns" in s]
    wrong_args = {
        "id": "SCN_wrongArgs",
        "label": "Wrong nights",
        "turns": [
            {
                "user": "Is a double room free?",
                "expect": [
                    {"function_call": {"name": "check_availability", "arguments": {"nights": 3}}}
                ],
            }
        ],
    }
    scenarios = _scenarios_file(tmp_path, [*scripted, wrong_args], name="Hotel front desk")
    results_path = tmp_path / "out" / "results.json"
    proc = run_lkeval(
        [
            *run_argv(HOTEL / "agent.py", scenarios, results_path),
            "--concurrency",
            "2",
        ],
        hotel_env(hotel_llm),
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    results = read_json(results_path)
    assert results["format_version"] == 1
    assert results["metadata"]["livekit_agents_version"]
    by_id = _by_id(results)

    check = by_id["SCN_checkDouble01"]
    assert check["status"] == "passed", check
    attempt = check["attempts"][0]
    assert (
        check["line"]
        == scenarios.read_text()
        .splitlines()
        .index(
            next(line for line in scenarios.read_text().splitlines() if "SCN_checkDouble01" in line)
        )
        + 1
    )
    greeting = [i for i in attempt["transcript"] if i["turn"] == 0 and i["kind"] == "message"]
    assert greeting and "Welcome" in greeting[0]["text"]  # the greeting was waited for
    assert all(e["passed"] for e in attempt["expectations"]) and len(attempt["expectations"]) == 5
    assert attempt["usage"]["agent"]["input_tokens"] > 0
    assert Path(attempt["log_path"]).is_file()
    assert attempt["boot_seconds"] > 0 and len(attempt["turn_seconds"]) == 1
    (turn,) = attempt["turns"]  # the agent's own metrics, under LiveKit's simulation names
    assert turn["latency_ms"] > 0 and turn["llm_ttft_ms"] > 0
    assert turn["llm_tps"] is None or turn["llm_tps"] > 0
    if LIVEKIT_AGENTS >= (1, 8):  # 1.6.6 sends the TTFT on the wire but not tokens/s
        assert turn["llm_tps"] is not None
    assert attempt["usage"]["agent"]["models"]  # get_session_usage names its models
    # each speed patch says whether it is on, once at the start and in every attempt
    patches = attempt["speed_patches"]
    assert patches["tool_schemas"].startswith("on (verified build_strict_openai_schema"), patches
    assert patches["idle_timers"].startswith("on (verified ProcPool._main_task"), patches
    assert set(patches) == {"tool_schemas", "idle_timers", "loop_monitor_pause", "tls_context"}
    assert proc.stdout.count("speed patches: tool_schemas on (verified") == 1, proc.stdout

    handoff = by_id["SCN_bookAda01"]
    assert handoff["status"] == "passed", handoff
    kinds = [i["kind"] for i in handoff["attempts"][0]["transcript"]]
    assert "agent_handoff" in kinds

    veto = by_id["SCN_vetoGrace01"]
    assert veto["status"] == "failed"
    assert "agent veto" in veto["reason"] and "Grace" in veto["reason"]
    sources = {v["source"]: v["verdict"] for v in veto["attempts"][0]["verdicts"]}
    assert sources == {"scripted": "pass", "agent": "fail"}

    wrong = by_id["SCN_wrongArgs"]
    assert wrong["status"] == "failed"
    assert "nights" in wrong["reason"] and "expected 3" in wrong["reason"]
    assert "✗" in proc.stdout and "Wrong nights" in proc.stdout


def test_faulty_agents_are_errors_and_the_run_goes_on(tmp_path: Path) -> None:
    rules = [
        {"model": "faulty-agent", "last_user": "explode", "tool_calls": [{"name": "explode"}]},
        {"model": "faulty-agent", "after_tool": "lookup", "text": "That failed."},
        {
            "model": "faulty-agent",
            "last_user": "bad key",
            "tool_calls": [{"name": "lookup", "arguments": {"key": "bad"}}],
        },
        {"model": "faulty-agent", "text": "Fine."},
    ]
    scenarios = _scenarios_file(
        tmp_path,
        [
            {
                "id": "crash",
                "label": "Crashes mid-turn",
                "userdata": {"fault": "exit_in_tool"},
                "turns": [
                    {"user": "please explode"},
                    {"user": "still there?", "expect": [{"message": {}}]},
                ],
            },
            {
                "id": "raises",
                "label": "Entrypoint raises",
                "userdata": {"fault": "raise_in_entrypoint"},
                "turns": [{"user": "hello", "expect": [{"message": {}}]}],
            },
            {
                "id": "tool-error",
                "label": "Tool error is an event",
                "turns": [
                    {
                        "user": "look up the bad key",
                        "expect": [
                            {"function_call": {"name": "lookup"}},
                            {"function_call_output": {"is_error": True}},
                            {"message": {"contains": "failed"}},
                        ],
                    }
                ],
            },
        ],
    )
    results_path = tmp_path / "results.json"
    with LLMServer(rules) as llm:
        proc = run_lkeval(
            [
                *run_argv(TEST_AGENTS / "faulty_agent.py", scenarios, results_path),
                "--boot-timeout",
                "90",
            ],
            clean_env(OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="k"),
        )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    by_id = _by_id(read_json(results_path))
    crash = by_id["crash"]
    assert crash["status"] == "error"
    assert "exited with code 3" in crash["reason"], crash["reason"]
    assert crash["attempts"][0]["log_tail"]
    raises = by_id["raises"]
    assert raises["status"] == "error"
    # found in the log, not timed out: a boot timeout's reason names it and not the crash
    assert "crashed" in raises["reason"] and "boot timeout" not in raises["reason"]
    assert by_id["tool-error"]["status"] == "passed", by_id["tool-error"]


def test_import_error_means_nothing_could_run(tmp_path: Path) -> None:
    scenarios = _scenarios_file(
        tmp_path,
        [
            # a check, so it is played (a scenario with nothing to check never boots)
            {"label": "Anything", "turns": [{"user": "hi", "expect": [{"message": {}}]}]},
            {"label": "Not selected", "turns": [{"user": "hi"}]},
        ],
    )
    results_path = tmp_path / "results.json"
    proc = run_lkeval(
        [
            *run_argv(TEST_AGENTS / "import_error_agent.py", scenarios, results_path),
            "--match",
            "any*",
        ],
        clean_env(),
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    # one line for what --match left out, and [k/N] counts what runs (was [2/2])
    assert "1 of 2 scenarios selected (match 'any*'); 1 not selected" in proc.stdout
    assert proc.stdout.count("not selected") == 1 and "[1/1]" in proc.stdout, proc.stdout
    result, unselected = read_json(results_path)["scenarios"]
    assert unselected["status"] == "skipped" and "not selected" in unselected["reason"]
    assert unselected["attempts"] == []
    assert result["status"] == "error"
    assert "lkeval_no_such_module" in result["reason"]
    assert "pass its interpreter with --python" in result["reason"], result["reason"]
    assert result["scenario_id"] == "tests/anything"  # derived from group name + label


def test_sigterm_writes_partial_results_and_leaves_no_agent(tmp_path: Path) -> None:
    """Forked agents; that cold ones are stopped by SIGTERM, leave nothing running and are
    recorded as cold in the partial results is test_orphans.py's SIGTERM-cold case (what is
    kept of a finished and an interrupted scenario does not depend on how agents started)."""
    rules = [
        {"model": "hotel-agent", "system": "Greet", "text": "Hello."},
        {"model": "hotel-agent", "last_user": "slow", "text": "...", "delay": 60},
        {"model": "hotel-agent", "text": "Quick."},
    ]
    scenarios = _scenarios_file(
        tmp_path,
        [
            {
                "id": "quick",
                "label": "Quick",
                "turns": [{"user": "hi", "expect": [{"message": {}}]}],
            },
            {
                "id": "slow",
                "label": "Slow",
                "turns": [{"user": "slow please", "expect": [{"message": {}}]}],
            },
        ],
    )
    agent = HOTEL / "agent.py"
    results_path = tmp_path / "results.json"
    with LLMServer(rules) as llm:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lkeval",
                *run_argv(agent, scenarios, results_path),
                "--concurrency",
                "1",
            ],
            env=hotel_env(llm),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait until the slow turn is in flight
            if any("slow please" in str(r.body) for r in llm.requests):
                break
            time.sleep(0.2)
        else:
            proc.kill()
            pytest.fail("the slow turn never reached the LLM")
        # every process lk-eval started: agents, and the fork server with its children
        descendants = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
        assert descendants
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, out + err
    results = read_json(results_path)
    assert results["metadata"]["interrupted"] is True
    by_id = _by_id(results)
    assert by_id["quick"]["status"] == "passed"
    slow = by_id["slow"]
    assert slow["status"] == "error" and "interrupted" in slow["reason"]
    (partial,) = slow["attempts"]  # what the interrupted attempt saw is kept
    assert partial["reason"] == "interrupted" and Path(partial["log_path"]).is_file()
    assert any(i["text"] == "Hello." for i in partial["transcript"])  # its greeting
    assert results["metadata"]["start_mode"] == "warm"
    assert_all_gone(descendants)  # the last SIGKILLed group members end when next scheduled
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("lkeval-*/slow.dispatch.json"))


def test_bad_scenario_file_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: Bad\nscenarios:\n  - label: ok\n    turns:\n      - user: hi\n"
        "        expect:\n          - function_call: {nmae: x}\n  - tags: {a: b}\n"
    )
    args = ["--agent", str(HOTEL / "agent.py"), "--results", str(tmp_path / "r.json")]
    proc = run_lkeval(["run", "--scenarios", str(bad), *args], clean_env())
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"{bad}:7:" in proc.stderr and "nmae" in proc.stderr  # the typo, with its line
    assert f"{bad}:8:" in proc.stderr and "label" in proc.stderr  # and the missing label
    assert not (tmp_path / "r.json").exists()
    proc = run_lkeval(["validate", str(bad)], clean_env())
    assert proc.returncode == 2 and f"{bad}:7:" in proc.stderr
    proc = run_lkeval(["validate", str(HOTEL / "scenarios.yaml")], clean_env())
    assert proc.returncode == 0
    assert "4 scenarios: 3 scripted" in proc.stdout and "1 simulated user only" in proc.stdout


def test_missing_agent_file_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.py"
    proc = run_lkeval(
        ["run", "--agent", str(missing), "--scenarios", str(HOTEL / "scenarios.yaml")],
        clean_env(),
    )
    assert proc.returncode == 2 and "nope.py" in proc.stderr and "Traceback" not in proc.stderr
