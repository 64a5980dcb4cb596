"""The host's end of the control channel, and the hooks that speak on it.

lk-eval hands the agent process a socket (``--control-fd``): the scenario and ``go`` come in,
the conditions line and ``prepared`` go out, ``ending`` when the agent itself hangs up, and end
of file means lk-eval is gone, so the agent's tree dies (:mod:`tree`). The wire is described in
docs/protocol.md. Part of the host: standard library and livekit only.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

if __package__:  # imported as lkeval.host.control
    from . import tree
    from .siblings import sibling
else:  # loaded by path in the agent's interpreter, by the host's loader
    sibling = sys.modules["_lkeval_siblings"].sibling
    tree = sibling("tree")

PREPARED = b'{"prepared": true}\n'
# lk-eval's word that the scenario's conversation slot is open: the session may start.
GO = b'{"go": true}\n'
# Sent when the agent itself ends its session (see announce_ending).
ENDING = b'{"ending": true}\n'


class Control:
    """The host's end of the control channel: the scenario and ``go`` in, ``prepared`` out,
    end of file = die.

    A daemon thread reads the channel from the start (before the slow imports), so the host
    dies with lk-eval even while it is importing, waiting, or stuck in a hung tool.
    """

    def __init__(self, fd: int) -> None:
        self._sock = socket.socket(fileno=fd)
        self._sock.setblocking(True)
        self._scenario = threading.Event()
        self._go = threading.Event()
        self._held = False
        self._dispatch = ""
        #: The scenario's ``mock_tools`` (tool name -> cases), sent with its dispatch.
        self.mock_tools: dict[str, Any] = {}
        self._ending_sent = False
        threading.Thread(target=self._watch, name="lkeval-control", daemon=True).start()

    def announce_prepared(self) -> None:
        """Tell lk-eval the agent is ready to start its session."""
        with contextlib.suppress(OSError):
            self._sock.sendall(self.conditions + PREPARED)

    def announce_ending(self) -> None:
        """Tell lk-eval (once) that the agent is ending its session: see :func:`announce_ending`."""
        if self._ending_sent:
            return
        self._ending_sent = True
        with contextlib.suppress(OSError):
            self._sock.sendall(ENDING)

    #: :func:`conditions_line`, sent with ``prepared``.
    conditions = b""
    #: Whether the session marks the end of its greeting (part of :attr:`conditions`).
    marks_greeting = False
    #: :func:`speed_patches` (part of :attr:`conditions`).
    patches: dict[str, str] = {}  # noqa: RUF012 (replaced, never changed in place)

    def wait_scenario(self) -> str:
        """Block until lk-eval has sent the scenario; returns its dispatch JSON."""
        self._scenario.wait()
        return self._dispatch

    def hold(self) -> bool:
        """True the first time only: the one session start that waits for ``go``."""
        held, self._held = self._held, True
        return not held

    def wait_go(self) -> None:
        """Block until lk-eval says go (the scenario's conversation slot is open)."""
        self._go.wait()

    def _watch(self) -> None:
        buf = b""
        while True:
            try:
                chunk = self._sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                tree.die_with_tree(1)
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                with contextlib.suppress(ValueError, TypeError, AttributeError, KeyError):
                    self._read(json.loads(line))

    def _read(self, message: dict[str, Any]) -> None:
        if "dispatch" in message:
            self._dispatch = str(message["dispatch"])
            self.mock_tools = dict(message.get("mock_tools") or {})
            self._scenario.set()
        if message.get("go") is True:
            self._go.set()


def hold_session_start(control: Control) -> None:
    """Hold the agent's session until lk-eval's ``go``: the per-job work before it runs while
    the agent waits for its conversation slot, the session itself only once the slot is open.

    The job (its runner, context and the entrypoint up to ``AgentSession.start``: the user's
    models and tools built, ``prewarm`` done) starts no session and no timer, so it runs before
    ``prepared``. ``AgentSession.start`` is where the greeting, the idle and away timers and
    the console's connection begin: the first call says ``prepared`` and waits for ``go``. So
    how long an agent waits for a slot cannot change its transcript, and none of the per-job
    work is inside the slot. (Mocks installed by ``tool_mocks`` wrap this from outside: an
    unknown mocked tool fails the agent before ``prepared``.)
    """
    import asyncio
    import functools

    from livekit.agents import AgentSession

    original: Callable[..., Any] = AgentSession.start

    @functools.wraps(original)
    async def start(self: Any, *args: Any, **kwargs: Any) -> Any:
        if control.hold():
            control.announce_prepared()
            # held, nothing of the agent's runs on this loop: its monitor need not tick
            resume_monitor = sibling("idle_timers").pause_loop_monitor()
            try:
                await asyncio.get_running_loop().run_in_executor(None, control.wait_go)
            finally:
                resume_monitor()
        return await original(self, *args, **kwargs)

    AgentSession.start = start  # type: ignore[method-assign]


def announce_ending(control: Control) -> None:
    """Tell lk-eval on the control channel when the agent itself ends its session.

    ``JobContext.shutdown``, ``AgentSession.shutdown`` and ``AgentSession.aclose`` first
    write ``{"ending": true}``, then do what they always did. The agent closes the console's
    connection only some milliseconds later (after its session's teardown), and no session
    event announces it; this line does, and since it is written before anything the agent
    sends after the call, lk-eval has it by the time it reads the turn's answer. So an agent
    that hangs up in its last turn is told apart from one that stays, however loaded the
    machine: lk-eval does not ask its verdict (docs/protocol.md, "Ending the session").
    """
    import functools
    import inspect

    from livekit.agents import AgentSession, JobContext

    def wrap(cls: type, name: str) -> None:
        original = cls.__dict__.get(name)
        if original is None or getattr(original, "_lkeval_ending", False):
            return
        if inspect.iscoroutinefunction(original):

            @functools.wraps(original)
            async def closing(self: Any, *args: Any, **kwargs: Any) -> Any:
                control.announce_ending()
                return await original(self, *args, **kwargs)

            wrapped: Any = closing
        else:

            @functools.wraps(original)
            def ending(self: Any, *args: Any, **kwargs: Any) -> Any:
                control.announce_ending()
                return original(self, *args, **kwargs)

            wrapped = ending
        wrapped._lkeval_ending = True
        setattr(cls, name, wrapped)

    wrap(JobContext, "shutdown")
    wrap(AgentSession, "shutdown")
    wrap(AgentSession, "aclose")
