"""A conversation with one connected agent: greeting, turns, usage, the agent's own verdict.

Turns go strictly one at a time (a second ``run_input`` interrupts the first, which then
returns ``[]``). Each request races the agent process: if it exits or its job crashes while a
turn is in flight, the turn fails at once with that reason instead of waiting for a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from typing import TypeVar

from livekit.protocol.agent_pb import agent_session as pb

from lkeval.agents.process import AgentFailure, AgentProcess
from lkeval.agents.protocol import ProtocolError, SessionConnection
from lkeval.results.model import TranscriptItem, TurnMetrics, Usage, Verdict, VerdictValue
from lkeval.results.pricing import PriceTable
from lkeval.run.turn_metrics import measure_turn

T = TypeVar("T")

_BUSY_STATES = {pb.AS_THINKING, pb.AS_SPEAKING}
_GREETING_SETTLE = 0.02
_ROLE_NAMES = {
    pb.USER: "user",
    pb.ASSISTANT: "assistant",
    pb.SYSTEM: "system",
    pb.DEVELOPER: "developer",
}


class AgentEndedSession(Exception):
    """The agent closed the connection or exited cleanly: it ended the conversation."""


def chat_item_to_transcript(item: pb.ChatContext.ChatItem, turn: int) -> TranscriptItem | None:
    """Translate one protocol chat item into the result model (None for unknown kinds)."""
    kind = item.WhichOneof("item")
    if kind == "message":
        msg = item.message
        text = "\n".join(c.text for c in msg.content if c.WhichOneof("payload") == "text")
        return TranscriptItem(
            kind="message",
            turn=turn,
            role=_ROLE_NAMES.get(msg.role, "unknown"),
            text=text,
            interrupted=msg.interrupted,
        )
    if kind == "function_call":
        call = item.function_call
        return TranscriptItem(
            kind="function_call",
            turn=turn,
            name=call.name,
            arguments=call.arguments,
            call_id=call.call_id,
        )
    if kind == "function_call_output":
        out = item.function_call_output
        return TranscriptItem(
            kind="function_call_output",
            turn=turn,
            name=out.name,
            output=out.output,
            is_error=out.is_error,
            call_id=out.call_id,
        )
    if kind == "agent_handoff":
        handoff = item.agent_handoff
        return TranscriptItem(
            kind="agent_handoff",
            turn=turn,
            old_agent=handoff.old_agent_id if handoff.HasField("old_agent_id") else None,
            new_agent=handoff.new_agent_id,
        )
    if kind == "agent_config_update":
        return TranscriptItem(kind="agent_config_update", turn=turn)
    return None


class Conversation:
    """Drives one connected agent; owns nothing but the requests it sends."""

    def __init__(self, conn: SessionConnection, agent: AgentProcess, turn_timeout: float) -> None:
        self.conn = conn
        self.agent = agent
        self.turn_timeout = turn_timeout
        self.state: int = pb.AS_INITIALIZING
        self._greeting_items: list[TranscriptItem] = []
        self._collect_greeting = True
        self.last_metrics: TurnMetrics | None = None  # of the last turn that got an answer
        conn.on_event(self._on_event)
        for received in list(conn.events):  # events that arrived before we listened
            self._on_event(received.event)

    def _on_event(self, event: pb.AgentSessionEvent) -> None:
        kind = event.WhichOneof("event")
        if kind == "agent_state_changed":
            self.state = event.agent_state_changed.new_state
        elif kind == "conversation_item_added" and self._collect_greeting:
            item = chat_item_to_transcript(event.conversation_item_added.item, 0)
            if item is not None:
                self._greeting_items.append(item)

    async def wait_for_greeting(self, timeout: float) -> tuple[list[TranscriptItem], str]:
        """Wait for an ``on_enter`` greeting to finish; a turn sent earlier would cut it off.

        An agent that greets reports thinking (or speaking) as its first state; one that does
        not reports listening. Returns turn-0 items and a note ("" when all went as expected).
        """
        deadline = time.monotonic() + timeout
        note = ""
        while self.state == pb.AS_INITIALIZING and time.monotonic() < deadline:
            await self._wait_event_or_failure(deadline)
        if self._first_busy_state_seen() or self.state in _BUSY_STATES:
            while time.monotonic() < deadline:
                if self.state not in _BUSY_STATES and self._has_reply():
                    if not await self._wait_event_or_failure(time.monotonic() + _GREETING_SETTLE):
                        break
                else:
                    await self._wait_event_or_failure(deadline)
            else:
                note = f"the greeting did not finish within {timeout:g}s"
        self._collect_greeting = False
        return list(self._greeting_items), note

    def _first_busy_state_seen(self) -> bool:
        # Older releases connect after the first state change, so the first event we see is
        # thinking -> listening: its old state still tells that a reply is being generated.
        for received in self.conn.events:
            if received.event.WhichOneof("event") == "agent_state_changed":
                change = received.event.agent_state_changed
                return change.new_state in _BUSY_STATES or change.old_state in _BUSY_STATES
        return False

    def _has_reply(self) -> bool:
        return any(i.kind == "message" and i.role == "assistant" for i in self._greeting_items)

    async def _wait_event_or_failure(self, deadline: float) -> bool:
        remaining = max(0.0, deadline - time.monotonic())
        got = await self._race(self.conn.wait_event(remaining))
        if self.conn.closed_reason is not None:
            await self._raise_closed()
        return got

    async def turn(self, turn_no: int, text: str) -> tuple[list[TranscriptItem], float]:
        """Send one user message; returns the turn's items (user message first) and seconds."""
        started = time.monotonic()
        request = pb.SessionRequest(run_input=pb.SessionRequest.RunInput(text=text))
        try:
            response = await self._race(self.conn.request_raw(request, self.turn_timeout))
        except ProtocolError:
            if self.conn.closed_reason is not None:
                await self._raise_closed()
            raise
        elapsed = time.monotonic() - started
        if response.HasField("error") and response.error:
            raise ProtocolError(
                f"turn {turn_no}: the agent answered with an error: {response.error}"
            )
        self.last_metrics = measure_turn(turn_no, elapsed, response.run_input.items)
        items = [TranscriptItem(kind="message", turn=turn_no, role="user", text=text)]
        for chat_item in response.run_input.items:
            converted = chat_item_to_transcript(chat_item, turn_no)
            if converted is not None and not (converted.role == "user" and converted.text == text):
                items.append(converted)
        return items, elapsed

    async def usage(self, prices: PriceTable | None = None) -> Usage | None:
        """The agent's own LLM token usage (``get_session_usage``), priced per model."""
        prices = prices or PriceTable()
        request = pb.SessionRequest(get_session_usage=pb.SessionRequest.GetSessionUsage())
        try:
            response = await self._race(self.conn.request(request, 10.0))
        except (ProtocolError, AgentFailure, AgentEndedSession):
            return None
        total = Usage()
        for model in response.get_session_usage.usage.model_usage:
            if model.WhichOneof("usage") == "llm":
                llm = model.llm
                total = total + prices.usage(llm.model, llm.input_tokens, llm.output_tokens)
        return total

    async def finalize(self, success: bool, reason: str) -> tuple[Verdict | None, str]:
        """Call ``finalize_simulation`` (exactly once per scenario: it runs
        ``on_simulation_end`` every time). Returns the agent's veto, if any, and an error note.
        """
        request = pb.SessionRequest(
            finalize_simulation=pb.SessionRequest.FinalizeSimulation(
                provisional_success=success, provisional_reason=reason
            )
        )
        try:
            response = await self._race(self.conn.request_raw(request, self.turn_timeout))
        except (ProtocolError, AgentFailure, AgentEndedSession) as exc:
            return None, f"finalize_simulation failed: {exc}"
        note = ""
        if response.HasField("error") and response.error:
            note = f"on_simulation_end raised: {response.error}"
        final = response.finalize_simulation
        if final.HasField("user_verdict"):
            verdict = final.user_verdict
            value: VerdictValue = "pass" if verdict.success else "fail"
            return Verdict(source="agent", verdict=value, reason=verdict.reason), note
        return None, note

    async def _race(self, work: Awaitable[T]) -> T:
        """Await ``work`` unless the agent process dies first."""
        task = asyncio.ensure_future(work)
        watch = asyncio.ensure_future(self.agent.wait_failure())
        try:
            done, _ = await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
            if task in done:
                return task.result()
            # Let a response that raced the exit win; otherwise report the death.
            await asyncio.sleep(0.05)
            if task.done() and not task.exception():
                return task.result()
            task.cancel()
            reason = watch.result()
            if self.agent.proc is not None and self.agent.proc.returncode == 0:
                raise AgentEndedSession(f"the agent ended the session ({reason})")
            raise AgentFailure(f"agent died: {reason}", self.agent.log_tail())
        finally:
            watch.cancel()
            if not task.done():
                task.cancel()

    async def _raise_closed(self) -> None:
        """The connection closed: decide whether the agent crashed or hung up."""
        assert self.agent.proc is not None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.agent.proc.wait()), 2.0)
        rc = self.agent.proc.returncode
        if rc is None or rc == 0:
            raise AgentEndedSession(f"the agent ended the session ({self.conn.closed_reason})")
        raise AgentFailure(f"agent died: {self.agent.exit_reason()}", self.agent.log_tail())
