"""An agent that hangs up in its last turn is told apart from one that stays, at any speed.

Before its own verdict is asked (``finalize_simulation``), lk-eval waits for the agent's turn
to be over and, for an agent that ends its session (``ctx.shutdown()``), for the close it
announced on the control channel. The close itself comes only after the session's teardown:
~10 ms for ``shutdown_mid``, 1.5 s for ``shutdown_slow`` (an ``on_exit`` that waits, as a
loaded machine would). Both must read "ended the session ... could not be asked": a quiet
spell of any fixed length would ask the slow one its verdict, and a hang-up would then pass
or not depending on how busy the machine was. The controls show the verdict is asked of an
agent that stays (no veto: passed; a veto: failed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import TEST_AGENTS, clean_env, read_json, run_argv, run_lkeval

pytestmark = pytest.mark.e2e

BROKEN = TEST_AGENTS / "broken_agent.py"
UNASKED = (
    "the agent ended the session (the agent closed the connection) after 1 caller turn(s); "
    "its own verdict (finalize_simulation / on_simulation_end) could not be asked"
)


def _scenario(sid: str, broken: str, user: str) -> dict[str, Any]:
    turn = {"user": user, "expect": [{"message": {"role": "assistant"}}]}
    return {"id": sid, "label": sid, "userdata": {"broken": broken}, "turns": [turn]}


def test_a_hang_up_reads_the_same_however_slowly_the_session_closes(tmp_path: Path) -> None:
    scenarios = [
        _scenario("hangs-up-fast", "shutdown_mid", "bye"),
        _scenario("hangs-up-slowly", "shutdown_slow", "bye"),
        _scenario("stays", "healthy", "hello"),
        _scenario("stays-and-vetoes", "veto", "hello"),
    ]
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"name": "Hang up", "scenarios": scenarios}))
    proc = run_lkeval(
        [*run_argv(BROKEN, path, tmp_path / "results.json"), "--concurrency", "4"],
        clean_env(OPENAI_API_KEY="not-a-key"),
    )
    by_id = {s["scenario_id"]: s for s in read_json(tmp_path / "results.json")["scenarios"]}
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for sid in ("hangs-up-fast", "hangs-up-slowly"):
        assert (by_id[sid]["status"], by_id[sid]["reason"]) == ("error", UNASKED), sid
        assert by_id[sid]["attempts"][0]["agent_check"] == f"not run: {UNASKED}", sid
    assert by_id["stays"]["status"] == "passed", by_id["stays"]["reason"]
    assert by_id["stays"]["attempts"][0]["agent_check"] == "passed (no veto)"
    vetoed = by_id["stays-and-vetoes"]
    assert (vetoed["status"], vetoed["reason"]) == (
        "failed",
        "agent veto: the booking was never written",
    )
