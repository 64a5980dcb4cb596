"""The agent doubles in tests/agents/ really do what real LiveKit agents do (docs/protocol.md;
docs/testing.md, "What real agents do").

Each test boots one agent through lk-eval's own launcher and agent host (text mode, scenario
attached; see tests/agent_session.py) and watches the console protocol. They assert the agent's
behaviour, never lk-eval's verdict on it: these agents exist so that the engine can be fixed
against them (docs/testing.md lists them). Each agent's env knobs shorten its timers, so
the file takes tens of seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_session import Booted, booted, closed_port_url, greeting_burst, run
from conftest import TEST_AGENTS
from livekit.protocol.agent_pb import agent_session as pb

from lkeval.agents.protocol import ProtocolError
from lkeval.testing.llm_server import LLMServer

pytestmark = pytest.mark.e2e

EDGE = TEST_AGENTS / "edge_agent.py"
DEAD_LLM = TEST_AGENTS / "dead_llm_agent.py"
FRONTDESK = TEST_AGENTS / "frontdesk" / "agent.py"
FRONTDESK_RULES = TEST_AGENTS / "frontdesk" / "llm_rules.yaml"
GREETING_STATES = ["thinking", "listening", "speaking", "listening"]
CLOSING = "AgentSession is closing due to unrecoverable error"
ADA_BOOKED = ["INSERT INTO appointments VALUES ('Ada', 'tuesday')"]


def states(b: Booted) -> list[str]:
    """The agent states announced so far, as lower-case names."""
    return [
        pb.AgentState.Name(e.event.agent_state_changed.new_state).removeprefix("AS_").lower()
        for e in b.conn.events
        if e.event.WhichOneof("event") == "agent_state_changed"
    ]


def timeline(b: Booted) -> list[str]:
    """Events as short labels: ``state:speaking``, ``item:message``, ``error``, ..."""
    return labels([e.event for e in b.conn.events])


def labels(events: list[pb.AgentSessionEvent]) -> list[str]:
    out = []
    for event in events:
        kind = event.WhichOneof("event")
        if kind == "agent_state_changed":
            out.append("state:" + states_of(event))
        elif kind == "conversation_item_added":
            out.append("item:" + str(event.conversation_item_added.item.WhichOneof("item")))
        elif kind in ("error", "user_state_changed"):
            out.append(str(kind))
    return out


def states_of(event: pb.AgentSessionEvent) -> str:
    return pb.AgentState.Name(event.agent_state_changed.new_state).removeprefix("AS_").lower()


def errors(b: Booted) -> list[str]:
    return [e.event.error.message for e in b.conn.events if e.event.WhichOneof("event") == "error"]


def greeted(b: Booted) -> bool:
    return bool(b.messages()) and states(b)[-1:] == ["listening"]


def test_turn0_is_handoff_then_the_greeting_burst(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with booted(EDGE, tmp_path, {"EDGE_AGENT": "burst", "OPENAI_API_KEY": "k"}) as b:
            assert await b.until(greeted)
            first = b.conn.events[0].event.conversation_item_added.item
            assert first.WhichOneof("item") == "agent_handoff"
            assert not first.agent_handoff.HasField("old_agent_id")  # none -> first agent
            assert first.agent_handoff.new_agent_id == "edge_agent"
            assert timeline(b) == [
                "item:agent_handoff",
                *(f"state:{s}" for s in GREETING_STATES[:3]),
                "item:message",
                "state:listening",
            ]
            assert b.messages() == ["Welcome to the edge desk. How can I help?"]
            assert labels(greeting_burst()) == timeline(b)  # the replayable double is faithful
            reply = await b.say("hello")
            assert not reply.error
            assert b.messages()[-1] == "You said: hello"

    run(scenario())


def test_silent_agent_never_produces_an_assistant_message(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with booted(EDGE, tmp_path, {"EDGE_AGENT": "silent", "OPENAI_API_KEY": "k"}) as b:
            reply = await b.say("hello?")
            assert not reply.error and list(reply.run_input.items) == []
            reply = await b.say("is anyone there?")
            assert not reply.error and list(reply.run_input.items) == []
            assert b.messages() == [] and b.messages("USER") == ["hello?", "is anyone there?"]

    run(scenario())


def test_agent_crashes_right_after_its_greeting(tmp_path: Path) -> None:
    env = {"EDGE_AGENT": "crash_after_greeting", "OPENAI_API_KEY": "k"}

    async def scenario() -> None:
        async with booted(EDGE, tmp_path, env) as b:
            assert await b.until(lambda b: b.conn.closed_reason is not None)
            assert b.messages() == ["Welcome to the edge desk. How can I help?"]
            assert await asyncio.wait_for(b.agent.proc.wait(), 30) == 70  # type: ignore[union-attr]

    run(scenario())


def dead_env(mode: str) -> dict[str, str]:
    """The dead-LLM agent with an unreachable LLM and LiveKit's retries shortened."""
    return {
        "OPENAI_BASE_URL": closed_port_url(),
        "OPENAI_API_KEY": "k",
        "DEAD_LLM_SESSION": mode,
        "DEAD_LLM_RETRIES": "1",
        "DEAD_LLM_RETRY_INTERVAL": "0.1",
    }


def test_dead_llm_session_closes_before_the_first_turn(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with booted(DEAD_LLM, tmp_path, dead_env("close")) as b:
            assert await b.until(lambda b: b.conn.closed_reason is not None)
            assert b.conn.closed_reason == "the agent closed the connection"
            assert errors(b) and all("APIConnectionError" in e for e in errors(b))
            assert CLOSING in b.log()
            assert b.messages() == [] and b.messages("USER") == []
            assert b.agent.proc is not None and b.agent.proc.returncode is None  # still alive

    run(scenario())


def test_dead_llm_session_stays_up_and_every_reply_fails(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with booted(DEAD_LLM, tmp_path, dead_env("stay")) as b:
            assert await b.until(lambda b: bool(errors(b)))  # the greeting failed first
            for text in ("hello", "anyone?"):
                reply = await b.say(text)
                assert "failed to generate LLM completion" in reply.error
                assert list(reply.run_input.items) == []
            assert b.messages() == [] and b.conn.closed_reason is None
            assert CLOSING not in b.log()

    run(scenario())


@pytest.fixture
def frontdesk_llm() -> Iterator[LLMServer]:
    with LLMServer.from_file(FRONTDESK_RULES) as server:
        yield server


def inference_env(llm: LLMServer, **knobs: str) -> dict[str, str]:
    """LiveKit Inference redirected to the scripted server (docs/protocol.md)."""
    return {
        "LIVEKIT_INFERENCE_URL": llm.base_url,
        "LIVEKIT_API_KEY": "devkey",
        "LIVEKIT_API_SECRET": "devsecret-not-a-secret",
        **knobs,
    }


def test_frontdesk_grades_its_own_book_and_writes_a_room_file(
    tmp_path: Path, frontdesk_llm: LLMServer
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    userdata = {"expected_state": ADA_BOOKED}

    async def scenario() -> None:
        env = inference_env(frontdesk_llm)
        async with booted(FRONTDESK, tmp_path, env, userdata, cwd=work) as b:
            assert await b.until(greeted)
            reply = await b.say("please book for Ada")
            kinds = [i.WhichOneof("item") for i in reply.run_input.items]
            assert kinds == ["function_call", "function_call_output", "message"]
            final = await b.finalize()
            assert not final.error and not final.finalize_simulation.HasField("user_verdict")

    run(scenario())
    # room is always "console": the file lands in the agent's own directory (beside its log,
    # kept after the stop), not in the project directory that parallel agents share
    assert [p.name for p in (tmp_path / "agent.files").iterdir()] == ["console.sqlite"]
    assert list(work.iterdir()) == []
    models = {r.body.get("model") for r in frontdesk_llm.requests}
    assert models == {"openai/gpt-4.1-mini"}
    assert all((r.authorization or "").count(".") == 2 for r in frontdesk_llm.requests)  # JWT


def test_frontdesk_vetoes_a_wrong_book_and_nudges_when_idle(
    tmp_path: Path, frontdesk_llm: LLMServer
) -> None:
    env = inference_env(frontdesk_llm, FRONTDESK_NUDGE_AFTER="1")

    async def scenario() -> None:
        async with booted(FRONTDESK, tmp_path, env, {"expected_state": ADA_BOOKED}) as b:
            assert await b.until(lambda b: "Are you still there?" in b.messages())
            assert b.messages("USER") == []  # unprompted
            final = await b.finalize()
            verdict = final.finalize_simulation.user_verdict
            assert not final.error and final.finalize_simulation.HasField("user_verdict")
            assert not verdict.success and "appointment book differs" in verdict.reason

    run(
        scenario(),
    )


def test_frontdesk_bad_sql_makes_finalize_answer_an_error_then_judges_run_at_shutdown(
    tmp_path: Path, frontdesk_llm: LLMServer
) -> None:
    env = inference_env(frontdesk_llm, FRONTDESK_SESSION_JUDGES="7")
    userdata = {"expected_state": ["INSRT INTO appointments VALUES ('Ada', 'tuesday')"]}

    async def scenario() -> None:
        async with booted(FRONTDESK, tmp_path, env, userdata) as b:
            assert await b.until(greeted)
            final = await b.finalize()
            assert final.error == 'near "INSRT": syntax error'
            log_path = b.log_path
        assert "frontdesk: session judges done" in log_path.read_text(errors="replace")

    run(scenario())
    judges = [r for r in frontdesk_llm.requests if r.body.get("tool_choice") == "required"]
    assert len(judges) == 7  # all during the SIGTERM grace period


def test_frontdesk_user_away_then_shutdown_mid_conversation(
    tmp_path: Path, frontdesk_llm: LLMServer
) -> None:
    env = inference_env(frontdesk_llm, FRONTDESK_AWAY_TIMEOUT="1")

    async def scenario() -> None:
        async with booted(FRONTDESK, tmp_path, env) as b:
            assert await b.until(lambda b: "Hello? Are you still with me?" in b.messages())
            assert "user_state_changed" in timeline(b)
            reply = await b.say("please hang up")
            assert not reply.error
            # ctx.shutdown() races the next request: the agent either closes the connection
            # or answers "AgentSession is closing" (issue 10, must-hold 9).
            if not await b.until(lambda b: b.conn.closed_reason is not None, timeout=3):
                try:
                    late = await b.say("are you there?")
                    assert "AgentSession is closing" in late.error
                except ProtocolError:
                    assert b.conn.closed_reason is not None
            log_path = b.log_path
        assert "the caller asked to hang up" in log_path.read_text(errors="replace")

    run(scenario())
