"""``lkeval dev`` against ``lkeval run``: the example agent, the same scripted LLM, the same
scenarios (scripted turns that pass, a failed check, the agent's veto, a simulated caller with
a judge) give the same transcripts, checks and verdicts in-process and through the console.

One ``lkeval run`` and two ``lkeval dev`` runs (the second keeps the judge preflight), each a
child process as a user runs them, all against one local LLM server.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import HOTEL, TEST_AGENTS, clean_env, hotel_env, read_json, run_argv, run_lkeval

from lkeval.testing.llm_server import LLMServer

pytestmark = pytest.mark.e2e

CANARY_REFUSAL = "I can't help with that."  # lkeval/llm/canaries.py: only the known-bad say it

WRONG_NIGHTS = {
    "id": "SCN_wrongNights",
    "label": "Checks the wrong number of nights",
    "turns": [
        {
            "user": "Is a double room free for two nights?",
            "expect": [
                {"function_call": {"name": "check_availability", "arguments": {"nights": 3}}}
            ],
        }
    ],
}


def _scenarios(tmp_path: Path) -> Path:
    example = yaml.safe_load((HOTEL / "scenarios.yaml").read_text(encoding="utf-8"))
    example["scenarios"].append(WRONG_NIGHTS)
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump(example, sort_keys=False), encoding="utf-8")
    return path


def _played(results: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on where the agent ran: per scenario its status and reason, and
    per attempt the transcript (call ids aside), the checks and the verdicts."""
    played = {}
    for scenario in results["scenarios"]:
        attempts = [
            {
                "transcript": [
                    {k: v for k, v in item.items() if k != "call_id"}
                    for item in attempt["transcript"]
                ],
                "expectations": attempt["expectations"],
                "verdicts": attempt["verdicts"],
                "agent_check": attempt["agent_check"],
                "end_reason": attempt["end_reason"],
            }
            for attempt in scenario["attempts"]
        ]
        played[scenario["scenario_id"]] = (scenario["status"], scenario["reason"], attempts)
    return played


def test_dev_plays_what_run_plays(tmp_path: Path, hotel_llm: LLMServer) -> None:
    scenarios = _scenarios(tmp_path)
    env = hotel_env(hotel_llm, XDG_CACHE_HOME=str(tmp_path / "cache"))
    llms = ["--caller-model", "caller", "--judge-model", "judge"]
    run_results = tmp_path / "run" / "results.json"
    run = run_lkeval([*run_argv(HOTEL / "agent.py", scenarios, run_results), *llms], env)
    assert run.returncode == 1, run.stdout + run.stderr  # the veto and the wrong nights fail

    before_dev = len(hotel_llm.requests)
    dev_results = tmp_path / "dev" / "results.json"
    dev_argv = ["dev", "--agent", str(HOTEL / "agent.py"), "--scenarios", str(scenarios)]
    dev_argv += ["--results", str(dev_results), "--junit", str(tmp_path / "dev" / "junit.xml")]
    dev = run_lkeval([*dev_argv, *llms, "--markdown", str(tmp_path / "dev" / "report.md")], env)
    assert dev.returncode == 1, dev.stdout + dev.stderr

    run_played, dev_played = _played(read_json(run_results)), _played(read_json(dev_results))
    assert dev_played == run_played
    statuses = {sid: played[0] for sid, played in dev_played.items()}
    assert statuses == {
        "SCN_checkDouble01": "passed",
        "SCN_bookAda01": "passed",
        "SCN_vetoGrace01": "failed",
        "hotel-front-desk/guest-books-a-room-by-talking-to-the-desk": "passed",
        "SCN_wrongNights": "failed",
    }
    assert "agent veto: expected booking" in dev_played["SCN_vetoGrace01"][1]
    judged = dev_played["hotel-front-desk/guest-books-a-room-by-talking-to-the-desk"][2][0]
    assert [v["source"] for v in judged["verdicts"]] == ["judge"]

    # the transcript as it happened, the same reports, one attempt each, in-process
    assert "    [1] user: Is a double room free for two nights?" in dev.stdout
    assert "lk-eval: in-process" in dev.stdout
    assert (tmp_path / "dev" / "junit.xml").is_file() and (tmp_path / "dev" / "report.md").is_file()
    dev_json = read_json(dev_results)
    assert dev_json["metadata"]["start_mode"] == "in-process"
    assert all(len(s["attempts"]) == 1 for s in dev_json["scenarios"])

    # the next run of the same judge keeps its preflight: no canary is asked again
    asked = len(hotel_llm.requests)
    again = run_lkeval([*dev_argv, *llms, "--match", "SCN_checkDouble01"], env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "judge preflight: kept from an earlier run of this judge" in again.stdout
    assert len(_canary_asks(hotel_llm.requests[before_dev:asked])) >= 12
    assert _canary_asks(hotel_llm.requests[asked:]) == []


def _canary_asks(requests: list[Any]) -> list[Any]:
    """The judge preflight's known-bad canaries (the agent in them refuses)."""
    return [r for r in requests if CANARY_REFUSAL in json.dumps(r.body.get("messages"))]


def test_dev_watch_plays_each_edit_of_the_agent(tmp_path: Path) -> None:
    """``--watch`` re-imports the edited agent: a reply changed in its source fails the check
    that passed, a syntax error is one line and the watch goes on, Ctrl-C ends it with the
    last run's code."""
    shutil.copy(TEST_AGENTS / "sim_end_agent.py", tmp_path / "watched_agent.py")
    agent = tmp_path / "watched_agent.py"
    scenarios = tmp_path / "scenarios.yaml"
    turn = {"user": "Book it", "expect": [{"message": {"contains": "You said: Book it"}}]}
    scenarios.write_text(yaml.safe_dump({"scenarios": [{"label": "Echo", "turns": [turn]}]}))
    argv = [sys.executable, "-m", "lkeval", "dev", "--watch", "--no-settings"]
    argv += ["--agent", str(agent), "--scenarios", str(scenarios)]
    env = clean_env(SIM_END_LOG=str(tmp_path / "ends.jsonl"), PYTHONUNBUFFERED="1")
    watcher = subprocess.Popen(
        [*argv, "--results", str(tmp_path / "results.json")],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        first = _until_watching(watcher)
        assert "lk-eval gate: passed" in first
        source = agent.read_text(encoding="utf-8")
        agent.write_text(source + "\nthis is not python(\n", encoding="utf-8")
        broken = _until_watching(watcher)
        assert "the agent module does not import" in broken and "Traceback" not in broken
        agent.write_text(source.replace("You said:", "You typed:"), encoding="utf-8")
        edited = _until_watching(watcher)
        assert "    [1] assistant: You typed: Book it." in edited
        assert "lk-eval gate: FAILED" in edited
    finally:
        watcher.send_signal(signal.SIGINT)
        code = watcher.wait(timeout=60)
    assert code == 1  # the last run's verdict


def _until_watching(watcher: subprocess.Popen[str], timeout: float = 180) -> str:
    """What the watcher printed up to its next "watching" line (read by a thread, so a hung
    watcher fails the test instead of hanging it)."""
    assert watcher.stdout is not None
    lines: list[str] = []

    def read() -> None:
        assert watcher.stdout is not None
        for line in watcher.stdout:
            lines.append(line)
            if line.startswith("lk-eval: watching"):
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    text = "".join(lines)
    assert lines and lines[-1].startswith("lk-eval: watching"), text
    return text
