"""The greeting is waited for however the agent makes it (real agent processes, real console).

An agent's session reports ``listening`` before ``thinking`` when ``on_enter`` awaits something
before it greets, or when the entrypoint greets after ``session.start`` returns. From states
alone lk-eval took both for agents that do not greet, sent turn one at once and lost the
greeting (the console interrupts it with force), so a scripted check on the greeting failed
and the conversation the judge saw had no greeting. The host now marks the greeting's end
(lkeval/host/greeting_mark.py); these scenarios fail on a lk-eval without the mark.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import TEST_AGENTS, clean_env, read_json, run_argv, run_lkeval

pytestmark = pytest.mark.e2e

BROKEN = TEST_AGENTS / "broken_agent.py"
GREETING = "Welcome to the broken desk. How can I help?"


def greeted(sid: str, mode: str, **extra: Any) -> dict[str, Any]:
    """Checks the greeting (turn 0), then one caller turn."""
    return {
        "id": sid,
        "label": sid,
        "userdata": {"broken": mode},
        "turns": [
            {"expect": [{"message": {"contains": "Welcome to the broken desk"}}]},
            {"user": "hello", "expect": [{"message": {"contains": "You said: hello"}}]},
        ],
        **extra,
    }


def test_every_way_of_greeting_is_kept_and_a_waiting_on_enter_is_not_a_hang(
    tmp_path: Path,
) -> None:
    waits = {
        "id": "on-enter-waits",
        "label": "on-enter-waits",
        "userdata": {"broken": "on_enter_waits"},
        "turn_timeout": 3,
        "turns": [{"user": "hello", "expect": [{"message": {"contains": "You said: hello"}}]}],
    }
    scenarios = [
        greeted("on-enter-greets", "healthy"),
        greeted("on-enter-looks-up-then-greets", "greet_late"),
        greeted("entrypoint-greets-after-start", "greet_from_entrypoint"),
        waits,
    ]
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"name": "Greetings", "scenarios": scenarios}))
    proc = run_lkeval(
        [*run_argv(BROKEN, path, tmp_path / "results.json"), "--concurrency", "2"],
        clean_env(),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    by_id = {s["scenario_id"]: s for s in read_json(tmp_path / "results.json")["scenarios"]}
    for sid in (
        "on-enter-greets",
        "on-enter-looks-up-then-greets",
        "entrypoint-greets-after-start",
    ):
        case = by_id[sid]
        said = [
            (i["turn"], i.get("role"), i.get("text"))
            for i in case["attempts"][0]["transcript"]
            if i["kind"] == "message"
        ]
        assert said == [
            (0, "assistant", GREETING),
            (1, "user", "hello"),
            (1, "assistant", "You said: hello"),
        ], sid
        assert case["status"] == "passed" and case["attempts"][0]["reason"] == "", sid
    # An on_enter that neither speaks nor returns: the wait ends at the turn timeout, says
    # so, and the conversation goes on.
    waited = by_id["on-enter-waits"]
    assert waited["status"] == "passed"
    assert waited["attempts"][0]["reason"].startswith(
        "the agent's on_enter neither returned nor finished a greeting within 3s (--turn-timeout)"
    )
