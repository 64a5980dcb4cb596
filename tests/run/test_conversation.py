"""Waits on agent state, against a stand-in console on loopback (no agent process).

The real agent's turn 0 can reach lk-eval within one event-loop tick (tests/agent_session.py's
``greeting_burst``, checked against the real agent in test_agent_doubles.py). A wait that checks
its condition and registers its waiter with a gap between them misses such a burst and sits
until its timeout; these tests would then see the timeout's note instead of an empty one.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from types import SimpleNamespace

import pytest
from agent_session import dial, greeting_burst, send_at_once
from google.protobuf.struct_pb2 import Struct
from livekit.protocol.agent_pb import agent_session as pb

from lkeval.agents import machine
from lkeval.agents.process import AgentFailure, AgentLaunch, AgentProcess
from lkeval.agents.protocol import SessionConnection, SessionListener
from lkeval.host import greeting_mark
from lkeval.run.conversation import Conversation, TurnFailed, died

GREETING_TIMEOUT = 20.0  # far above a burst's milliseconds: hitting it means a lost wakeup


class NeverDies(AgentProcess):
    """An agent process that is alive for the whole test (no process behind it)."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(AgentLaunch(agent=tmp_path / "a.py"), tmp_path / "d", tmp_path / "a.log")

    async def wait_failure(self, poll: float = 0.1) -> str:
        await asyncio.Event().wait()
        return ""


async def _connected() -> tuple[asyncio.StreamWriter, SessionConnection]:
    listener = SessionListener()
    writer = await dial(await listener.start())
    return writer, await listener.accepted


@pytest.mark.parametrize("order", ["burst_then_wait", "wait_then_burst"])
def test_greeting_burst_in_one_tick_ends_the_wait_by_its_condition(
    tmp_path: Path, order: str
) -> None:
    async def scenario() -> tuple[list[str], str]:
        writer, conn = await _connected()
        if order == "burst_then_wait":
            await send_at_once(writer, greeting_burst(text="Hi there"))
            while len(conn.events) < 6:
                await conn.wait_event(5)
        conv = Conversation(conn, NeverDies(tmp_path), turn_timeout=GREETING_TIMEOUT)
        waiting = asyncio.ensure_future(conv.wait_for_greeting(GREETING_TIMEOUT))
        if order == "wait_then_burst":
            await asyncio.sleep(0)  # the wait is registered; the burst lands in one read
            await send_at_once(writer, greeting_burst(text="Hi there"))
        items, note = await waiting
        writer.close()
        await conn.close()
        return [f"{i.kind}:{i.role or ''}:{i.text}" for i in items], note

    items, note = asyncio.run(scenario())
    assert note == ""
    assert items == ["agent_handoff::", "message:assistant:Hi there"]


def _frames(events: list[pb.AgentSessionEvent]) -> bytes:
    out = b""
    for event in events:
        payload = pb.AgentSessionMessage(event=event).SerializeToString()
        out += len(payload).to_bytes(4, "big") + payload
    return out


def test_burst_read_between_the_check_and_the_wait_is_not_lost(tmp_path: Path) -> None:
    """The worst tick: the connection's reader reads the whole burst after the wait checked
    the agent's state and before any waiter could be woken. Scheduling makes it exact: the
    bytes land in the parked reader's buffer in the same step that starts the wait, so the
    reader's wakeup is queued before anything the wait schedules."""

    async def scenario() -> tuple[list[str], str]:
        ours, theirs = socket.socketpair()
        _, writer = await asyncio.open_connection(sock=ours)
        reader = asyncio.StreamReader()
        conn = SessionConnection(reader, writer)
        await asyncio.sleep(0)  # the reader task is parked, waiting for bytes
        conv = Conversation(conn, NeverDies(tmp_path), turn_timeout=GREETING_TIMEOUT)
        reader.feed_data(_frames(greeting_burst(text="Hi there")))
        items, note = await conv.wait_for_greeting(GREETING_TIMEOUT)
        await conn.close()
        theirs.close()
        return [f"{i.kind}:{i.text}" for i in items], note

    items, note = asyncio.run(scenario())
    assert note == ""
    assert items == ["agent_handoff:", "message:Hi there"]


def test_a_wait_that_times_out_says_what_it_last_saw(tmp_path: Path) -> None:
    stuck = greeting_burst(text="Hi there")[:-1]  # still speaking: never back to listening

    async def scenario() -> tuple[int, str]:
        writer, conn = await _connected()
        await send_at_once(writer, stuck)
        conv = Conversation(conn, NeverDies(tmp_path), turn_timeout=0.3)
        items, note = await conv.wait_for_greeting(0.3)
        writer.close()
        await conn.close()
        return len(items), note

    count, note = asyncio.run(scenario())
    assert count == 2
    assert note.startswith(
        "the greeting message arrived but the agent did not return to listening within 0.3s "
        "(--turn-timeout); state speaking; last events: "
    )
    assert "state speaking, item message; machine load average " in note


def test_a_failed_greeting_ends_the_wait_with_the_agents_error(tmp_path: Path) -> None:
    def state(s: int) -> pb.AgentSessionEvent:
        return pb.AgentSessionEvent(
            agent_state_changed=pb.AgentSessionEvent.AgentStateChanged(new_state=s)
        )

    error = pb.AgentSessionEvent(error=pb.AgentSessionEvent.Error(message="llm down"))
    failed = [state(pb.AgentState.AS_THINKING), error, state(pb.AgentState.AS_LISTENING)]

    async def scenario() -> tuple[str, list[str]]:
        writer, conn = await _connected()
        conv = Conversation(conn, NeverDies(tmp_path), turn_timeout=GREETING_TIMEOUT)
        waiting = asyncio.ensure_future(conv.wait_for_greeting(GREETING_TIMEOUT))
        await asyncio.sleep(0)
        await send_at_once(writer, failed)
        _, note = await waiting
        writer.close()
        await conn.close()
        return note, conv.errors

    note, errors = asyncio.run(scenario())
    assert note == "" and errors == ["llm down"]


def _state(s: int) -> pb.AgentSessionEvent:
    return pb.AgentSessionEvent(
        agent_state_changed=pb.AgentSessionEvent.AgentStateChanged(new_state=s)
    )


def _greeting_settled() -> pb.AgentSessionEvent:
    payload = Struct()
    payload.update({greeting_mark.KEY: greeting_mark.SETTLED})
    return pb.AgentSessionEvent(debug_message=pb.DebugMessage(payload=payload))


@pytest.mark.parametrize("marks", [True, False], ids=["host-marks", "host-cannot-mark"])
def test_a_greeting_after_a_lookup_is_waited_for_when_the_host_marks_it(
    tmp_path: Path, marks: bool
) -> None:
    """An ``on_enter`` that awaits a lookup before it greets: the session says listening
    first. With the host's mark (host/greeting_mark.py) the wait holds until the mark and
    keeps the greeting; without it (a host that cannot mark) the first listening state means
    "no greeting", as before."""
    burst = greeting_burst(text="Hi there")
    handoff, later = burst[0], burst[1:]

    async def scenario() -> tuple[bool, list[str], str]:
        writer, conn = await _connected()
        agent = NeverDies(tmp_path)
        agent.marks_greeting = marks
        conv = Conversation(conn, agent, turn_timeout=GREETING_TIMEOUT)
        waiting = asyncio.ensure_future(conv.wait_for_greeting(GREETING_TIMEOUT))
        await send_at_once(writer, [handoff, _state(pb.AgentState.AS_LISTENING)])
        while len(conn.events) < 2:
            await conn.wait_event(5)
        for _ in range(20):  # let the wait see both events (an unmarked one ends here)
            await asyncio.sleep(0.01)
        waited = not waiting.done()
        await send_at_once(writer, [*later, _greeting_settled()])
        items, note = await waiting
        writer.close()
        await conn.close()
        return waited, [f"{i.kind}:{i.text}" for i in items], note

    waited, items, note = asyncio.run(scenario())
    assert note == ""
    if marks:
        assert waited and items == ["agent_handoff:", "message:Hi there"]
    else:
        assert not waited and items == ["agent_handoff:"]


class StoppedAtBound(AgentProcess):
    """An agent process lk-eval stopped at its memory bound (killed: a non-zero return code)."""

    REASON = "agent stopped: it used 900 MiB of memory, more than its 700 MiB (--agent-memory)"

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(AgentLaunch(agent=tmp_path / "a.py"), tmp_path / "d", tmp_path / "a.log")
        self._stopped_for = self.REASON

    async def wait_failure(self, poll: float = 0.1) -> str:
        return self.REASON


def test_an_agent_stopped_at_a_bound_is_reported_once_not_as_agent_died(tmp_path: Path) -> None:
    async def scenario() -> str:
        writer, conn = await _connected()
        agent = StoppedAtBound(tmp_path)
        agent.proc = SimpleNamespace(returncode=-9)  # type: ignore[assignment]  # SIGKILLed
        conv = Conversation(conn, agent, turn_timeout=GREETING_TIMEOUT)
        with pytest.raises(AgentFailure) as info:
            await conv.wait_for_greeting(GREETING_TIMEOUT)
        writer.close()
        await conn.close()
        return info.value.reason

    assert asyncio.run(scenario()) == StoppedAtBound.REASON
    exited = "agent process exited with code 3"
    assert died(exited) == f"agent died: {exited}"
    assert died(StoppedAtBound.REASON) == StoppedAtBound.REASON


@pytest.mark.parametrize(("load", "busy"), [((37.9, 30.0, 25.0), True), ((0.4, 0.3, 0.2), False)])
def test_a_turn_timeout_says_how_busy_the_machine_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, load: tuple[float, ...], busy: bool
) -> None:
    """lk-eval's turn clock counts the agent's (and lk-eval's) wait for a CPU as the agent's
    time: a turn timeout on an overloaded runner says the machine was busier than its cores,
    with the figure; on a quiet one it gives the figure alone (the agent was slow)."""
    monkeypatch.setattr(machine.os, "getloadavg", lambda: load)
    monkeypatch.setattr(machine.os, "cpu_count", lambda: 2)

    async def scenario() -> str:
        writer, conn = await _connected()  # a console that never answers run_input
        conv = Conversation(conn, NeverDies(tmp_path), turn_timeout=0.3)
        with pytest.raises(TurnFailed) as info:
            await conv.turn(1, "hello")
        writer.close()
        await conn.close()
        return str(info.value)

    reason = asyncio.run(scenario())
    assert reason.startswith("turn 1 got no answer within 0.3s (--turn-timeout, ")
    figure = f"; machine load average {load[0]:.1f} on 2 core(s)"
    if busy:
        assert (
            f"{figure}: the machine was busier than its cores, so this timeout may be the "
            "machine's, not the agent's" in reason
        ), reason
        assert reason.endswith("run fewer scenarios at once: --concurrency)"), reason
    else:
        assert reason.endswith(figure), reason


def test_no_load_figure_where_the_load_average_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    def unknown() -> tuple[float, float, float]:
        raise OSError("no load average here")

    monkeypatch.setattr(machine.os, "getloadavg", unknown)
    assert machine.with_load("agent did not connect within 60s (boot timeout)") == (
        "agent did not connect within 60s (boot timeout)"
    )
