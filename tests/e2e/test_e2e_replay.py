"""Record and replay through the real CLI and real agent processes (issue 22's proof).

The example hotel agent, its availability tool changed to ask a local HTTP server (aiohttp), a
scripted scenario and a simulated one (caller and judge): record with every server up; stop
every LLM and tool server and replay: the same transcripts, tool calls, verdicts and exit code;
edit the agent's prompt: a miss at its first call with a readable diff; ``auto`` with the
servers back records the new episode.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import hotel_env, read_json
from replay_agent import SCENARIOS, Rooms, conversation, replay_agent, servers
from replay_agent import run_with_cassettes as _run

pytestmark = pytest.mark.e2e


def test_record_stop_every_server_replay_edit_and_go_live(tmp_path: Path) -> None:
    """Warm starts here; cold ones replay in test_e2e_replay_twenty.py (and record in the canary
    test)."""
    (tmp_path / "scenarios.yaml").write_text(SCENARIOS, encoding="utf-8")
    agent = replay_agent(tmp_path)
    cold: list[str] = []
    with servers() as (llm, rooms):
        ports = (llm.port, rooms.server_address[1])
        env = hotel_env(
            llm,
            ROOMS_URL=f"http://127.0.0.1:{ports[1]}/rooms",
            LKEVAL_CALLER_BASE_URL=llm.base_url,
            LKEVAL_JUDGE_BASE_URL=llm.base_url,
        )
        recorded, first = _run(tmp_path, agent, env, "record", "--cassette-mode", "record", *cold)
        assert recorded.returncode == 0, recorded.stdout + recorded.stderr
        assert Rooms.asked, "the tool really asked the rooms server"
    cassettes = sorted(p.name for p in (tmp_path / "cassettes").iterdir())
    assert cassettes == [
        "_manifest.json",
        "_preflight.json",
        "check-double.json",
        "talk-and-book.json",
    ]
    assert all(a["replay"]["mode"] == "recorded" for s in first["scenarios"] for a in s["attempts"])

    # every server is gone: replay alone answers
    replayed, again = _run(tmp_path, agent, env, "replay", "--cassette-mode", "replay", *cold)
    assert replayed.returncode == recorded.returncode, replayed.stdout + replayed.stderr
    assert conversation(again) == conversation(first)
    for scenario in again["scenarios"]:
        (attempt,) = scenario["attempts"]
        assert attempt["replay"]["mode"] == "replayed", attempt["replay"]
        assert attempt["replay"]["calls_live"] == 0 and attempt["replay"]["calls_replayed"] > 0
        assert attempt["turns"] and all(t["replayed"] for t in attempt["turns"])
    assert again["figures"]["latency_ms"] is None  # replayed turns time nothing

    # the agent's prompt is edited: its first chat call (after livekit's GET /models) misses,
    # saying where
    calls = read_json(tmp_path / "cassettes" / "check-double.json")["exchanges"]["agent"]
    first_chat = next(c["call"] for c in calls if c["request"]["url"].endswith("/completions"))
    source = agent.read_text(encoding="utf-8")
    agent.write_text(source.replace("Check availability", "Always check availability"))
    missed, edited = _run(tmp_path, agent, env, "edited", "--cassette-mode", "replay", *cold)
    assert missed.returncode == 1, missed.stdout + missed.stderr
    for scenario in edited["scenarios"]:
        (attempt,) = scenario["attempts"]
        assert attempt["status"] == "error", attempt
        assert attempt["replay"]["mode"] == "missed" and attempt["replay"]["client"] == "agent"
        prefix = f"replay miss at agent's call {first_chat}: body.messages[0].content: recorded "
        assert attempt["reason"].startswith(prefix), attempt["reason"]
        recorded, sent = attempt["reason"].removeprefix(prefix).split(", sent ")
        assert recorded.startswith('"…') and "Hotel Example. Check availability with" in recorded
        assert sent.startswith('"…') and "Hotel Example. Always check availability" in sent

    # auto with the servers back: live from that call, and the cassette is the new episode
    with servers(ports) as (llm, _):
        went_live, live = _run(tmp_path, agent, env, "auto", *cold)
        assert went_live.returncode == 0, went_live.stdout + went_live.stderr
        assert llm.requests, "the agent's LLM was called live"
    for scenario in live["scenarios"]:
        (attempt,) = scenario["attempts"]
        replay = attempt["replay"]
        assert replay["mode"] == "partial" and replay["live_from_call"] == first_chat, replay
    cassette = read_json(tmp_path / "cassettes" / "check-double.json")
    system = cassette["exchanges"]["agent"][first_chat - 1]["request"]["body"]["json"]["messages"][
        0
    ]
    assert "Always check availability" in system["content"]
    replayed, latest = _run(tmp_path, agent, env, "again", "--cassette-mode", "replay", *cold)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert conversation(latest) == conversation(live)
