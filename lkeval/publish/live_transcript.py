"""``lkeval dev``'s display: each scenario's conversation printed as it happens.

In the edit-and-rerun loop the developer watches one scenario at a time, so a start line, then
every message and tool call as the agent's session reports it, then the usual result line
(:class:`~lkeval.publish.progress.TerminalProgress`). The lines are the transcript's own
(:func:`~lkeval.results.wording.format_item`), masked and made inert: the conversation quotes
the agent and the simulated caller, untrusted text.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, TextIO

from livekit.protocol.agent_pb import agent_session as pb

from lkeval.publish.progress import TerminalProgress
from lkeval.results.model import ScenarioResult, TranscriptItem
from lkeval.results.wording import format_item
from lkeval.run.transcript import chat_item_to_transcript
from lkeval.text.masking import mask
from lkeval.text.untrusted import inert_lines, terminal_text

#: How far each transcript line is indented under its scenario's start line.
INDENT = "    "


class LiveTranscript:
    """Prints a session's items as they arrive (its ``echo``), each conversation under its
    scenario's start line, and the result lines (a
    :class:`~lkeval.run.engine.ProgressObserver`)."""

    def __init__(self, stream: TextIO, total: int | None = None) -> None:
        self.stream = stream
        self._lock = threading.Lock()
        self._results = TerminalProgress(stream, total, status_every=3600.0)
        self._turn = 0  # the caller's lines so far in the scenario playing
        self._headers: dict[str, str] = {}  # started, its conversation not begun yet

    def scenario_started(self, scenario_id: str, label: str) -> None:
        """Noted: its ``▶ label (id)`` line comes when its conversation begins (the next
        scenario's agent starts while one still plays)."""
        self._headers[scenario_id] = (
            f"▶ {terminal_text(label, 120)} ({terminal_text(scenario_id, 80)})"
        )
        self._results.scenario_started(scenario_id, label)

    def conversation_begins(self, scenario_id: str) -> None:
        """The session events from now on are this scenario's: its ``▶`` line (once)."""
        self._turn = 0
        header = self._headers.pop(scenario_id, None)
        if header is not None:
            self._write(header)

    def scenario_finished(self, result: ScenarioResult) -> None:
        """The result line ``lkeval run`` prints."""
        self._headers.pop(result.scenario_id, None)  # one that never conversed
        self._results.scenario_finished(result)

    def __call__(self, event: Any) -> None:
        """One session event: its messages and tool calls become lines."""
        for item in _items(event):
            if item.kind == "message" and item.role == "user":
                self._turn += 1
            item = dataclasses.replace(item, turn=self._turn)
            self._write(INDENT + format_item(item).replace("\n", "\n" + INDENT))

    def _write(self, text: str) -> None:
        with self._lock:  # the session's events come from the agent's loop, lines from ours
            self.stream.write(inert_lines(mask(text)) + "\n")
            self.stream.flush()


def _items(event: pb.AgentSessionEvent) -> list[TranscriptItem]:
    """The transcript items an event carries (none for states, usage, debug marks)."""
    kind = event.WhichOneof("event")
    chat: list[pb.ChatContext.ChatItem] = []
    if kind == "conversation_item_added":
        chat.append(event.conversation_item_added.item)
    elif kind == "function_tools_executed":
        executed = event.function_tools_executed
        chat += [pb.ChatContext.ChatItem(function_call=c) for c in executed.function_calls]
        outputs = executed.function_call_outputs
        chat += [pb.ChatContext.ChatItem(function_call_output=o) for o in outputs]
    items = (chat_item_to_transcript(c, 0) for c in chat)
    return [i for i in items if i is not None]
