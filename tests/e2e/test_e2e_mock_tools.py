"""End to end: ``mock_tools:`` makes the front-desk agent's database tool hermetic.

The front desk's ``book_appointment`` writes to a sqlite appointment book in the agent's own
directory, and the agent grades its book in ``on_simulation_end``. One real run through the
thin CLI (warm agents) plays four scenarios: the mocked tool answers from the scenario and the
book stays as seeded; an error case reaches the LLM as the tool's error; a name the agent has
no tool of is an error naming its tools; and the same booking unmocked does write the book
(the control that shows the first one could have failed).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import TEST_AGENTS, clean_env, read_json, run_argv, run_lkeval

from lkeval.testing.llm_server import LLMServer

pytestmark = pytest.mark.e2e

FRONTDESK = TEST_AGENTS / "frontdesk"
MOCKED = "Booked Ada on Tuesday (from the mock)."
BOOK_ADA = {"user": "please book for Ada"}


@pytest.fixture
def frontdesk_llm() -> Iterator[LLMServer]:
    with LLMServer.from_file(FRONTDESK / "llm_rules.yaml") as server:
        yield server


def scenario(sid: str, mocks: dict[str, object] | None, expect: list[object]) -> dict[str, object]:
    return {
        "id": sid,
        "label": sid,
        # the agent's own grade: the book must be exactly the seed (nobody booked)
        "userdata": {"expected_state": []},
        "turns": [{**BOOK_ADA, "expect": expect}],
        **({"mock_tools": mocks} if mocks is not None else {}),
    }


def book_rows(attempt: dict[str, object]) -> list[tuple[str, str]]:
    """The appointment book the agent left in its own directory (kept beside its log)."""
    log = Path(str(attempt["log_path"]))
    with sqlite3.connect(log.with_name(log.stem + ".files") / "console.sqlite") as conn:
        return sorted(conn.execute("SELECT name, day FROM appointments").fetchall())


def test_mock_tools_make_a_database_tool_hermetic(tmp_path: Path, frontdesk_llm: LLMServer) -> None:
    scenarios = [
        scenario(
            "mocked",
            {"book_appointment": MOCKED},
            [
                {"function_call": {"name": "book_appointment", "arguments": {"name": "Ada"}}},
                {"function_call_output": {"output": MOCKED, "is_error": False}},
                {"message": {"contains": "(from the mock)"}},
            ],
        ),
        scenario(
            "mocked-error",
            {"book_appointment": [{"when": {"name": "Ada"}, "error": "the book is locked"}]},
            [
                {"skip": 1},
                {"function_call_output": {"output_contains": "book is locked", "is_error": True}},
            ],
        ),
        scenario("unknown", {"book_apointment": "x"}, [{"function_call": {}}]),
        scenario("real", None, [{"function_call": {"name": "book_appointment"}}]),
    ]
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"name": "Front desk", "scenarios": scenarios}))
    results_path = tmp_path / "out" / "results.json"
    env = clean_env(
        LIVEKIT_INFERENCE_URL=frontdesk_llm.base_url,
        LIVEKIT_API_KEY="devkey",
        LIVEKIT_API_SECRET="devsecret-not-a-secret",
    )
    proc = run_lkeval(
        [*run_argv(FRONTDESK / "agent.py", path, results_path), "--concurrency", "2"], env
    )
    by_id = {s["scenario_id"]: s for s in read_json(results_path)["scenarios"]}

    mocked = by_id["mocked"]
    assert mocked["status"] == "passed", mocked
    assert book_rows(mocked["attempts"][0]) == [("Grace", "monday")]  # the tool never ran

    error = by_id["mocked-error"]
    assert error["status"] == "passed", error
    assert book_rows(error["attempts"][0]) == [("Grace", "monday")]

    unknown = by_id["unknown"]
    assert unknown["status"] == "error", unknown
    assert (
        "mock_tools do not fit the agent: unknown tool 'book_apointment'; "
        "the agent's tools: book_appointment" in unknown["reason"]
    )

    real = by_id["real"]  # the control: unmocked, the tool writes the book and the agent vetoes
    assert book_rows(real["attempts"][0]) == [("Ada", "tuesday"), ("Grace", "monday")]
    assert real["status"] == "failed" and "appointment book differs" in real["reason"]
    assert proc.returncode == 1, proc.stdout + proc.stderr
