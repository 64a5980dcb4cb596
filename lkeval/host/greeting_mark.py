"""Marks, in the agent's own event stream, the moment its ``on_enter`` greeting is over.

Why: an agent may await something in ``on_enter`` before it greets (a profile lookup, a
database, an API). Its session then reports ``listening`` first and ``thinking`` only later,
and from state events alone lk-eval would take it for an agent that does not greet and send
turn one at once; the console's ``run_input`` interrupts with force, so the greeting is lost.
How soon the first state arrives also depends on the machine's load (the console dials in
while ``on_enter`` already runs), so the same agent could greet in one run and not in the
next. The agent's own process knows better: this module emits a ``debug_message`` session
event with the payload ``{"lkeval": "greeting_settled"}`` once

- every speech created since the session started has finished (spoken, interrupted or
  failed), and
- ``on_enter`` has returned or created at least one speech. (An ``on_enter`` that awaits an
  ``AgentTask`` greets through the task, then waits for the caller: its first speech is the
  greeting.)

The first check waits one loop step after ``AgentSession.start`` returns, so the other common
greeting, ``await session.start(...)`` then ``session.generate_reply(...)`` in the entrypoint,
counts too (its speech is created before the entrypoint first yields). A greeting the entrypoint
makes only after awaiting something else is not seen: lk-eval reads such a one from states.

The console forwards ``debug_message`` events through the same ordered stream as the
greeting's own events, so lk-eval has every greeting item before it sees the mark. An
``on_enter`` that neither speaks nor returns never settles: lk-eval waits out its turn timeout,
notes it, and goes on (docs/protocol.md, "The greeting").

Runs in the agent's interpreter (loaded by path by ``agent_host.py``): nothing of lk-eval's is
imported. ``_on_enter_task`` (livekit-agents 1.6.6 to 1.8) is the one private name read;
without it only the speeches count, and an ``on_enter`` that never speaks settles at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from typing import Any

KEY = "lkeval"
SETTLED = "greeting_settled"


def install() -> bool:
    """Wrap ``AgentSession.start`` so each session marks its greeting; False when this
    livekit-agents cannot emit the mark (lk-eval then reads the greeting from states alone)."""
    from livekit.agents import AgentSession

    if not callable(getattr(AgentSession, "_emit_debug_message", None)):
        return False
    original = AgentSession.start
    if getattr(original, "_lkeval_greeting", False):
        return True

    @functools.wraps(original)
    async def start(self: Any, *args: Any, **kwargs: Any) -> Any:
        watch = GreetingWatch(self)
        try:
            result = await original(self, *args, **kwargs)
        except BaseException:
            watch.stop()
            raise
        watch.session_started()
        return result

    start._lkeval_greeting = True  # type: ignore[attr-defined]
    AgentSession.start = start  # type: ignore[method-assign]
    return True


class GreetingWatch:
    """Follows one session from its start until its greeting is over, then marks it once."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.speeches: list[Any] = []
        self.on_enter: asyncio.Future[Any] | None = None
        self.started = False
        self.marked = False
        session.on("speech_created", self._on_speech)

    def _on_speech(self, event: Any) -> None:
        handle = getattr(event, "speech_handle", None)
        if handle is None or self.marked:
            return
        self.speeches.append(handle)
        handle.add_done_callback(lambda _: self._check())

    def session_started(self) -> None:
        """``AgentSession.start`` returned: ``on_enter`` runs (or ran) as the activity's task."""
        self.started = True
        activity = getattr(self.session, "_activity", None)
        task = getattr(activity, "_on_enter_task", None)
        if isinstance(task, asyncio.Future) and not task.done():
            self.on_enter = task
            task.add_done_callback(lambda _: self._check())
        # after the entrypoint's own next steps: a greeting it makes right after start counts
        asyncio.get_running_loop().call_soon(self._check)

    def settled(self) -> bool:
        if any(not handle.done() for handle in self.speeches):
            return False
        entering = self.on_enter is not None and not self.on_enter.done()
        return not entering or bool(self.speeches)

    def _check(self) -> None:
        if self.marked or not self.started or not self.settled():
            return
        self.stop()
        with contextlib.suppress(Exception):  # a closing session: nothing left to mark
            self.session._emit_debug_message({KEY: SETTLED})

    def stop(self) -> None:
        self.marked = True
        with contextlib.suppress(Exception):
            self.session.off("speech_created", self._on_speech)
