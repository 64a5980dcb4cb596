"""A conversation with one connected agent: greeting, turns, usage, the agent's own verdict.

Turns go strictly one at a time (a second ``run_input`` interrupts the first, which then
returns ``[]``). Each request races the agent process: if it exits or its job crashes while a
turn is in flight, the turn fails at once with that reason instead of waiting for a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from livekit.protocol.agent_pb import agent_session as pb

from lkeval.agents.limits import STOPPED
from lkeval.agents.machine import with_load
from lkeval.agents.process import AgentFailure
from lkeval.agents.protocol import ProtocolError, SessionConnection
from lkeval.agents.session_agent import SessionAgent
from lkeval.host import greeting_mark
from lkeval.results.model import TranscriptItem, TurnMetrics, Usage, Verdict, VerdictValue
from lkeval.results.pricing import PriceTable
from lkeval.run.transcript import chat_item_to_transcript, state_name
from lkeval.run.turn_metrics import measure_turn

T = TypeVar("T")

_BUSY_STATES = {pb.AS_THINKING, pb.AS_SPEAKING}
_GREETING_SETTLE = 0.02
# Waits re-check the connection this often (its close also wakes them).
_CLOSE_POLL = 0.25
_FAILED_GREETING_GRACE = 0.5
_CLOSING_GRACE = 0.5
_SETTLE_MAX = 2.0
_TOOL_EVENTS = ("function_tools_started", "function_tools_executed")


class AgentEndedSession(Exception):
    """The agent closed the connection or exited cleanly: it ended the conversation."""


class TurnFailed(ProtocolError):
    """A turn the agent answered with an error or not at all; ``items`` is what it produced
    before that (the user line, tool calls), kept for the transcript."""

    def __init__(self, message: str, items: list[TranscriptItem]) -> None:
        super().__init__(message)
        self.items = items


class Conversation:
    """Drives one connected agent; owns nothing but the requests it sends.

    Every wait on agent state goes through :meth:`_wait_until`: the condition is checked and
    the waiter registered in the same synchronous step, and events wake waiters from the
    connection's reader, so a burst delivered within one tick cannot be missed.
    """

    def __init__(self, conn: SessionConnection, agent: SessionAgent, turn_timeout: float) -> None:
        self.conn = conn
        self.agent = agent
        self.turn_timeout = turn_timeout
        self.state: int = pb.AS_INITIALIZING
        self.errors: list[str] = []  # the agent's own ``error`` events, in order
        self._greeting_items: list[TranscriptItem] = []
        self._collect_greeting = True
        self._greeting_settled = False  # the agent marked its greeting over (greeting_mark.py)
        self.last_metrics: TurnMetrics | None = None  # of the last turn that got an answer
        self._turn_items: list[TranscriptItem] | None = None
        self._turn_no = 0
        self._errors_before_turn = 0
        self._partial: list[TranscriptItem] = []
        self._waiters: list[asyncio.Future[None]] = []
        self._last_events: list[str] = []
        conn.on_event(self._on_event)
        conn.on_close(self._wake)
        for received in list(conn.events):  # events that arrived before we listened
            self._on_event(received.event)

    def _on_event(self, event: pb.AgentSessionEvent) -> None:
        kind = event.WhichOneof("event")
        if kind == "agent_state_changed":
            self.state = event.agent_state_changed.new_state
            self._remember(f"state {state_name(self.state)}")
        elif kind == "error":
            self.errors.append(event.error.message)
            self._remember(f"error {event.error.message[:80]!r}")
        elif kind == "conversation_item_added":
            self._on_item(event.conversation_item_added.item)
        elif kind in _TOOL_EVENTS:
            self._on_tools(event)
        elif kind == "debug_message":
            mark = event.debug_message.payload.fields.get(greeting_mark.KEY)
            if mark is not None and mark.string_value == greeting_mark.SETTLED:
                self._greeting_settled = True
                self._remember("greeting settled")
        self._wake()

    def _wake(self) -> None:
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(None)

    # What an audio turn (run/audio_turns.py) needs of the conversation: it has no request
    # whose answer ends the turn, so it collects the turn's items from the events as a failed
    # text turn does, and waits on the same wake-ups.
    wake = _wake

    def begin_turn(self, turn_no: int) -> None:
        """Collect the agent's items as turn ``turn_no``'s from now on."""
        self._turn_no, self._turn_items = turn_no, []
        self._errors_before_turn = len(self.errors)

    def take_turn_items(self) -> list[TranscriptItem]:
        """The items collected since :meth:`begin_turn` (user messages aside); stops collecting."""
        items, self._turn_items = self._turn_items or [], None
        return items

    def has_turn_reply(self) -> bool:
        """An assistant message (or an agent error) arrived since :meth:`begin_turn`; not an
        interrupted one: that is the reply this turn's line cut into, not the answer to it."""
        if len(self.errors) > self._errors_before_turn:
            return True
        return any(
            i.kind == "message" and i.role == "assistant" and not i.interrupted
            for i in self._turn_items or ()
        )

    async def wait_until(self, done: Callable[[], bool], deadline: float) -> bool:
        """:meth:`_wait_until`, for audio turns."""
        return await self._wait_until(done, deadline)

    def turn_failed(self, turn_no: int, text: str, why: str) -> TurnFailed:
        """A turn that got no answer, with what it produced so far."""
        user = TranscriptItem(kind="message", turn=turn_no, role="user", text=text)
        self._partial = [user, *self.take_turn_items()]
        message = why if why.startswith("turn ") else f"turn {turn_no}: {why}"
        return TurnFailed(message, self.take_partial())

    def _on_item(self, chat_item: pb.ChatContext.ChatItem) -> None:
        if self._collect_greeting:
            item = chat_item_to_transcript(chat_item, 0)
            if item is not None:
                self._greeting_items.append(item)
        else:
            self._add_turn_item(chat_item_to_transcript(chat_item, self._turn_no))
        self._remember(f"item {chat_item.WhichOneof('item')}")

    def _on_tools(self, event: pb.AgentSessionEvent) -> None:
        """Tool calls as they start or finish: a turn that fails later keeps them."""
        kind = str(event.WhichOneof("event"))
        self._remember(kind.replace("function_", ""))
        if self._turn_items is None:
            return
        body = getattr(event, kind)
        items: list[pb.ChatContext.ChatItem] = [
            pb.ChatContext.ChatItem(function_call=call) for call in body.function_calls
        ]
        if kind == "function_tools_executed":
            items += [
                pb.ChatContext.ChatItem(function_call_output=out)
                for out in body.function_call_outputs
            ]
        for chat_item in items:
            self._add_turn_item(chat_item_to_transcript(chat_item, self._turn_no))

    def _add_turn_item(self, item: TranscriptItem | None) -> None:
        if self._turn_items is None or item is None:
            return
        if item.kind == "message" and item.role == "user":
            return
        seen = {(i.kind, i.call_id) for i in self._turn_items if i.call_id}
        if not (item.call_id and (item.kind, item.call_id) in seen):
            self._turn_items.append(item)

    def _remember(self, what: str) -> None:
        self._last_events = [*self._last_events[-3:], what]

    def last_seen(self) -> str:
        """What the agent last reported, for messages about a wait that timed out."""
        seen = ", ".join(self._last_events) or "no event at all"
        return f"state {state_name(self.state)}; last events: {seen}"

    async def _wait_until(self, done: Callable[[], bool], deadline: float) -> bool:
        """Wait until ``done()`` holds (True) or the deadline passes (False).

        Raises when the agent dies or the connection closes (its close wakes the wait; a
        short poll is the backstop).
        """
        loop = asyncio.get_running_loop()
        while not done():
            if self.conn.closed_reason is not None:
                await self._raise_closed()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            fut: asyncio.Future[None] = loop.create_future()
            self._waiters.append(fut)  # registered before any await: no lost wakeup
            try:
                with contextlib.suppress(asyncio.TimeoutError):
                    await self._race(asyncio.wait_for(fut, min(remaining, _CLOSE_POLL)))
            finally:
                self._waiters.remove(fut)
        return True

    async def wait_for_greeting(self, timeout: float) -> tuple[list[TranscriptItem], str]:
        """Wait for an ``on_enter`` greeting to finish; a turn sent earlier would cut it off.

        Our agent host marks the moment its greeting is over in the event stream
        (``host/greeting_mark.py``): ``on_enter`` returned or spoke, and every speech so far
        finished. That covers an ``on_enter`` that awaits a lookup before it greets, whose
        first state is listening. Then, or with a host that cannot mark: an agent that greets
        reports thinking (or speaking) as its first state; one that does not reports
        listening. A greeting ends when the agent is back to listening with a reply, or with
        an error (its LLM failed). Returns turn-0 items and a note ("" when all went as
        expected; else what the wait last saw).
        """
        deadline = time.monotonic() + timeout
        note = ""
        started = await self._wait_until(lambda: self.state != pb.AS_INITIALIZING, deadline)
        marked = self.agent.marks_greeting
        if started and marked and not await self._wait_until(self._marked, deadline):
            note = with_load(
                f"the agent's on_enter neither returned nor finished a greeting within "
                f"{timeout:g}s (--turn-timeout); {self.last_seen()}"
            )
        elif started and (self._first_busy_state_seen() or self.state in _BUSY_STATES):
            while True:
                if not await self._wait_until(self._greeting_done, deadline):
                    note = self._greeting_timeout_note(timeout)
                    break
                # Let a burst still in flight land: done only if nothing follows at once.
                settle = min(deadline, time.monotonic() + _GREETING_SETTLE)
                more = self._more_events_than(len(self.conn.events))
                if not await self._wait_until(more, settle):
                    break
        elif not started:
            note = with_load(f"the agent reported no state within {timeout:g}s; {self.last_seen()}")
        if self.errors and not self._has_reply():
            # The greeting failed: a session about to close over it closes within
            # milliseconds; see that here rather than as a broken first turn.
            await self._wait_until(lambda: False, time.monotonic() + _FAILED_GREETING_GRACE)
        self._collect_greeting = False
        return list(self._greeting_items), note

    def _greeting_timeout_note(self, timeout: float) -> str:
        if self._has_reply():
            what = "the greeting message arrived but the agent did not return to listening"
        else:
            what = "no greeting message arrived"
        return with_load(f"{what} within {timeout:g}s (--turn-timeout); {self.last_seen()}")

    def _marked(self) -> bool:
        return self._greeting_settled

    def _more_events_than(self, count: int) -> Callable[[], bool]:
        return lambda: len(self.conn.events) > count

    def _greeting_done(self) -> bool:
        return self.state not in _BUSY_STATES and (self._has_reply() or bool(self.errors))

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

    async def turn(self, turn_no: int, text: str) -> tuple[list[TranscriptItem], float]:
        """Send one user message; returns the turn's items (user message first) and seconds.

        A turn that fails (an error answer, no answer in time, the agent gone) keeps what it
        produced so far, the user line and the items the agent announced as events: a
        :class:`TurnFailed` carries them, and :meth:`take_partial` has them after any other
        exception (the agent died or hung up).
        """
        started = time.monotonic()
        user = TranscriptItem(kind="message", turn=turn_no, role="user", text=text)
        self._turn_no, self._turn_items = turn_no, []
        request = pb.SessionRequest(run_input=pb.SessionRequest.RunInput(text=text))
        try:
            response = await self._race(self._request_in_time(request))
            if response.HasField("error") and response.error:
                raise ProtocolError(f"the agent answered with an error: {response.error}")
        except BaseException as exc:
            self._partial = [user, *(self._turn_items or [])]
            if not isinstance(exc, (ProtocolError, asyncio.TimeoutError)):
                raise
            if self.conn.closed_reason is None and not isinstance(exc, asyncio.TimeoutError):
                await self._closing_grace()  # raises when the session was closing
            if self.conn.closed_reason is not None:
                await self._raise_closed()
            message = f"turn {turn_no}: {exc}"
            if isinstance(exc, asyncio.TimeoutError):
                message = with_load(
                    f"turn {turn_no} got no answer within {self.turn_timeout:g}s "
                    f"(--turn-timeout, or the scenario's limits.turn_timeout); {self.last_seen()}"
                )
            raise TurnFailed(message, self.take_partial()) from None
        finally:
            self._turn_items = None
        elapsed = time.monotonic() - started
        self.last_metrics = measure_turn(turn_no, elapsed, response.run_input.items)
        items = [user]
        for chat_item in response.run_input.items:
            converted = chat_item_to_transcript(chat_item, turn_no)
            if converted is not None and not (converted.role == "user" and converted.text == text):
                items.append(converted)
        return items, elapsed

    async def _request_in_time(self, request: pb.SessionRequest) -> pb.SessionResponse:
        """The request under our own turn timeout (the connection's is a backstop), so a
        timeout is told apart from a broken connection."""
        pending = asyncio.ensure_future(self.conn.request_raw(request, self.turn_timeout + 5.0))
        try:
            return await asyncio.wait_for(asyncio.shield(pending), self.turn_timeout)
        finally:
            if not pending.done():
                pending.cancel()
            with contextlib.suppress(BaseException):
                await pending  # retrieve its outcome: no "exception never retrieved"

    def take_partial(self) -> list[TranscriptItem]:
        """What the unfinished greeting or turn produced (once; empty when all finished)."""
        if self._collect_greeting:
            self._collect_greeting = False
            return list(self._greeting_items)
        partial, self._partial = self._partial, []
        return partial

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

    async def agent_instructions(self) -> str | None:
        """The agent's instructions, for LiveKit's built-in judges (``task_completion``
        judges blind without them): ``get_agent_info``, else the history's system message."""
        info = pb.SessionRequest(get_agent_info=pb.SessionRequest.GetAgentInfo())
        history = pb.SessionRequest(get_chat_history=pb.SessionRequest.GetChatHistory())
        with contextlib.suppress(ProtocolError, AgentFailure, AgentEndedSession):
            response = await self._race(self.conn.request(info, 5.0))
            if response.get_agent_info.instructions.strip():
                return response.get_agent_info.instructions
            response = await self._race(self.conn.request(history, 5.0))
            for item in response.get_chat_history.items:
                found = chat_item_to_transcript(item, 0)
                if found and found.role in ("system", "developer") and found.text.strip():
                    return found.text
        return None

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
            await self._settle()
            response = await self._race(self.conn.request_raw(request, self.turn_timeout))
            if response.HasField("error") and response.error:
                await self._closing_grace()
        except (ProtocolError, AgentFailure, AgentEndedSession) as exc:
            return None, f"the agent's own verdict could not be asked (finalize_simulation: {exc})"
        note = ""
        if response.HasField("error") and response.error:
            note = f"on_simulation_end raised: {response.error}"
        final = response.finalize_simulation
        if final.HasField("user_verdict"):
            verdict = final.user_verdict
            value: VerdictValue = "pass" if verdict.success else "fail"
            return Verdict(source="agent", verdict=value, reason=verdict.reason), note
        return None, note

    async def _settle(self) -> None:
        """Before the agent's verdict: its turn must be over and, if it is hanging up, the
        hang-up seen. Both are events, not a quiet spell: the agent's state back to listening
        (or idle) ends every reply, and an agent that ends its session (``ctx.shutdown()``)
        says so on the control channel before it answers anything after that call
        (``AgentProcess.ending_announced``), while its connection closes only after its
        session's teardown. Asking it earlier would race that close and make the outcome
        depend on load; so it is waited for. Raises when the connection closes meanwhile."""
        deadline = time.monotonic() + _SETTLE_MAX
        await self._wait_until(
            lambda: self.state not in _BUSY_STATES or self.agent.ending_announced(), deadline
        )
        if self.agent.ending_announced():
            # not a verdict to ask: wait for the close (raises) that the agent announced
            await self._wait_until(lambda: False, time.monotonic() + self.turn_timeout)

    async def _closing_grace(self) -> None:
        """After an error answer: a session that is closing ("AgentSession is closing")
        drops the connection right after; wait a moment so that outcome is told the same way
        every time (the agent ended the session), whichever came first."""
        await self._wait_until(lambda: False, time.monotonic() + _CLOSING_GRACE)

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
            raise AgentFailure(died(reason), self.agent.log_tail())
        finally:
            watch.cancel()
            if not task.done():
                task.cancel()
            # an interrupted request can still end with the connection's error: read it, so
            # asyncio does not print "Task exception was never retrieved" on Ctrl-C
            task.add_done_callback(_retrieve)

    async def _raise_closed(self) -> None:
        """The connection closed: decide whether the agent crashed or hung up."""
        if self.conn.fault is not None:  # we dropped it: the agent broke the protocol
            raise ProtocolError(self.conn.fault)
        assert self.agent.proc is not None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.agent.proc.wait()), 2.0)
        rc = self.agent.proc.returncode
        if rc is None or rc == 0:
            raise AgentEndedSession(f"the agent ended the session ({self.conn.closed_reason})")
        raise AgentFailure(died(self.agent.exit_reason()), self.agent.log_tail())


def died(reason: str) -> str:
    """An agent process's end as a scenario's reason: ``agent died: ...``, except when lk-eval
    stopped it at a bound, whose reason already says so ("agent stopped: it used ..."; not
    "agent died: agent stopped: ...")."""
    return reason if reason.startswith(STOPPED) else f"agent died: {reason}"


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
