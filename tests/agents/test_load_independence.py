"""Load cannot change a transcript: no agent session runs before its conversation can start.

The front-desk agent nudges ("Are you still there?") after 2 s of silence following its last
message, and its LLM answers after 1.5 s. Agents are prepared ahead (forked, module imported,
server started) while they wait for a conversation slot, but their session, greeting and idle
timer start only when the slot opens. So the same six scenarios give the same transcripts at
concurrency 1 (five agents wait their turn), 2 and 4; had a waiting agent's session started,
it would have greeted an empty room and nudged it before its first user turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import TEST_AGENTS

from lkeval.agents.fork_client import ForkServer
from lkeval.agents.process import AgentLaunch, agent_env
from lkeval.results.model import ScenarioResult
from lkeval.run.attempt import RunSettings
from lkeval.run.engine import AgentSlots, Engine, EngineOptions, attempt_factory
from lkeval.scenarios.loader import load_or_raise
from lkeval.testing.llm_server import LLMServer

FRONTDESK = TEST_AGENTS / "frontdesk" / "agent.py"
RULES = TEST_AGENTS / "frontdesk" / "llm_rules.yaml"
NUDGE = "Are you still there?"


class _Quiet:
    def scenario_started(self, scenario_id: str, label: str) -> None:
        pass

    def scenario_finished(self, result: ScenarioResult) -> None:
        pass


@pytest.fixture(scope="module")
def slow_llm() -> Iterator[LLMServer]:
    rules = yaml.safe_load(RULES.read_text())
    with LLMServer(rules["rules"], default_text=rules["default_text"], quirks={"delay": 1.5}) as s:
        yield s


def _scenarios(tmp_path: Path) -> Path:
    turn = {
        "user": "please book for Ada",
        "expect": [{"contains": {"function_call": {"name": "book_appointment"}}}],
    }
    scenarios = [{"id": f"book{n}", "label": f"Book {n}", "turns": [turn]} for n in range(6)]
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"name": "Load", "scenarios": scenarios}))
    return path


def _transcripts(results: list[ScenarioResult]) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    for result in results:
        assert result.status == "passed", (result.scenario_id, result.reason)
        (attempt,) = result.attempts
        out[result.scenario_id] = [
            (i.kind, i.turn, i.role, i.text, i.name, i.arguments, i.output)
            for i in attempt.transcript
        ]
    return out


@pytest.mark.e2e
def test_transcripts_are_the_same_at_every_concurrency(tmp_path: Path, slow_llm: LLMServer) -> None:
    env = {
        "LIVEKIT_INFERENCE_URL": slow_llm.base_url,
        "LIVEKIT_API_KEY": "devkey",
        "LIVEKIT_API_SECRET": "devsecret-not-a-secret",
        "FRONTDESK_NUDGE_AFTER": "2",
    }
    launch = AgentLaunch(FRONTDESK, env=env, cwd=tmp_path)
    server = ForkServer.start(launch.python, agent_env(launch), agent=FRONTDESK)
    groups, _ = load_or_raise([_scenarios(tmp_path)])
    by_concurrency = {}
    try:
        for concurrency in (1, 2, 4):
            logs = tmp_path / f"c{concurrency}"
            settings = RunSettings(
                launch=AgentLaunch(FRONTDESK, env=env, cwd=tmp_path, launcher=server),
                logs_dir=logs,
                work_dir=logs,
            )
            engine = Engine(
                attempt_factory(settings, None),
                _Quiet(),
                EngineOptions(concurrency=concurrency, repeat=1),
            )
            results = asyncio.run(engine.run(groups[0].scenarios))
            assert {a.start_mode for r in results for a in r.attempts} == {"warm"}
            by_concurrency[concurrency] = _transcripts(results)
    finally:
        server.close()
    reference = by_concurrency[1]["book0"]
    texts = [item[3] for item in reference]
    assert "Welcome to Example Clinic. How can I help?" in texts  # the greeting, in turn 0
    assert NUDGE not in texts
    for concurrency, transcripts in by_concurrency.items():
        for scenario_id, transcript in transcripts.items():
            assert transcript == reference, (concurrency, scenario_id, transcript)


def test_slots_bound_talking_and_prepared_agents_separately() -> None:
    """N conversations at once, and at most N more agents prepared (or preparing) meanwhile."""
    counts = {"preparing": 0, "talking": 0}
    peaks = {"preparing": 0, "talking": 0}

    def enter(state: str) -> None:
        counts[state] += 1
        peaks[state] = max(peaks[state], counts[state])

    async def attempt(slots: AgentSlots, talk_for: float) -> None:
        async with slots.attempt() as slot:
            enter("preparing")
            await asyncio.sleep(0.001)  # the agent imports and starts its server
            await slot.converse()
            counts["preparing"] -= 1
            enter("talking")
            await asyncio.sleep(talk_for)  # its session runs only from here
            counts["talking"] -= 1

    async def main() -> None:
        slots = AgentSlots(2)
        await asyncio.gather(*(attempt(slots, 0.01 * (n % 3 + 1)) for n in range(8)))

    asyncio.run(main())
    assert peaks == {"preparing": 2, "talking": 2}
