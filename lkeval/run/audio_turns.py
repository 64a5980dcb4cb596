"""Audio turns: the caller speaks a line into the microphone, the agent hears and answers aloud.

A text turn is one ``run_input`` request; an audio turn has no request at all. The line is
spoken (the caller's voice, ``--voice``), played into the microphone in real time, and the agent
takes it from there as on a phone call: its VAD and end-of-turn model decide the caller is done,
its STT transcribes (``user_input_transcribed``, then the user message), its LLM and TTS answer,
and the speaker plays the reply. The turn is over when the agent has answered and is listening
again with nothing left to play.

What the turn keeps is the conversation as the agent experienced it: the user line in the
transcript is what the agent *heard* (``said`` keeps what the caller said), so the judge and the
expectations see what the agent had to work with, and a misheard booking number fails a check
on it. Its timing is the caller's: from the last sample of the line to the agent's first audio
on the wire (``first_audio_ms``), beside the agent's own ``e2e_latency``.

Barge-in: a turn that ``interrupt_after`` a delay starts speaking that long into the agent's
previous reply; that reply's turn ends there (:meth:`AudioCall.turn` with ``leave_after``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from livekit.protocol.agent_pb import agent_session as pb

from lkeval.agents.machine import with_load
from lkeval.results.model import AudioCallRecord, TranscriptItem, TurnMetrics
from lkeval.run.audio_line import FrameFilter, Microphone, Reply, Speaker, SpokenLine
from lkeval.run.turn_metrics import measure_turn
from lkeval.run.word_errors import word_error_rate

if TYPE_CHECKING:
    from lkeval.run.conversation import Conversation

#: The caller's voice: a line of text -> 48 kHz mono s16le speech.
Speak = Callable[[str], Awaitable[bytes]]
#: Told each line just before the microphone speaks it (the local speech server's oracle).
BeforeLine = Callable[[str], None]

#: Silence the caller leaves after the agent's reply before speaking again.
CALLER_PAUSE = 0.5
#: After the agent is back to listening with nothing to play: how long nothing may follow for
#: the turn to be over (a tool call, a second message would start within it).
_SETTLE = 0.3
_BUSY = {pb.AS_THINKING, pb.AS_SPEAKING}


@dataclass(frozen=True)
class AudioSettings:
    """How lk-eval speaks and listens in audio mode."""

    speak: Speak
    before_line: BeforeLine | None = None
    frame_filter: FrameFilter | None = None
    #: After each frame through ``frame_filter``: how long the line holds it back (jitter).
    frame_delay: Callable[[], float] | None = None
    #: Given each caller line as its first frame goes through ``frame_filter`` (the
    #: impairments reseed, and set the noise level against the first line's speech).
    line_start: Callable[[bytes], None] | None = None
    caller_pause: float = CALLER_PAUSE
    #: ``--listen``: a speech-to-text for the agent's played audio (mono s16le, its rate).
    listen: Callable[[bytes, int], Awaitable[str]] | None = None
    #: What ``frame_filter`` did to the line so far (``--impair``), for the attempt's record.
    line_report: Callable[[], str] | None = None


@dataclass
class _Heard:
    """What the agent reported hearing and saying, from its events (wire clock)."""

    finals: list[tuple[float, str]] = field(default_factory=list)
    user_items: list[tuple[float, str]] = field(default_factory=list)
    chat_items: list[tuple[float, pb.ChatContext.ChatItem]] = field(default_factory=list)
    false_interruptions: list[float] = field(default_factory=list)
    overlaps: list[float] = field(default_factory=list)


class AudioCall:
    """The microphone, the speaker and what the agent heard, for one conversation."""

    def __init__(self, conv: Conversation, settings: AudioSettings) -> None:
        self.conv = conv
        self.settings = settings
        self.mic = Microphone(
            conv.conn, settings.frame_filter, settings.frame_delay, settings.line_start
        )
        self.speaker = Speaker(conv.conn, conv.wake)
        self.heard = _Heard()
        self._played: dict[int, list[Reply]] = {}  # each turn's replies, for --listen
        self.started = time.monotonic()  # the call's clock starts with the microphone
        conv.conn.on_event(self._on_event)
        self.mic.start()

    async def close(self) -> None:
        await self.mic.stop()
        self.speaker.close()

    def record(self) -> AudioCallRecord:
        """The call so far, for the attempt's result."""
        replies, lines = self.speaker.replies, [x for x in self.mic.lines if x.started]
        first_line = lines[0].started if lines else None
        greeting = [r for r in replies if first_line is None or r.arrived < first_line]
        return AudioCallRecord(
            agent_replies=len(replies),
            agent_audio_s=round(sum(r.ends - r.starts for r in replies), 3),
            interrupted_replies=sum(1 for r in replies if r.cleared is not None),
            greeting_audio_s=round(sum(r.seconds for r in greeting), 3) if greeting else None,
            caller_lines=len(lines),
            caller_audio_s=round(sum(x.seconds for x in lines), 3),
            mic_stalls=self.mic.stalls,
            line=self.settings.line_report() if self.settings.line_report else "",
        )

    def _on_event(self, event: pb.AgentSessionEvent) -> None:
        at = time.monotonic()
        kind = event.WhichOneof("event")
        if kind == "user_input_transcribed" and event.user_input_transcribed.is_final:
            self.heard.finals.append((at, event.user_input_transcribed.transcript))
        elif kind == "conversation_item_added":
            item = event.conversation_item_added.item
            self.heard.chat_items.append((at, item))
            if item.WhichOneof("item") == "message" and item.message.role == pb.USER:
                text = "\n".join(c.text for c in item.message.content if c.text)
                self.heard.user_items.append((at, text))
        elif kind == "agent_false_interruption":
            self.heard.false_interruptions.append(at)
        elif kind == "overlapping_speech":
            self.heard.overlaps.append(at)

    def reply_done(self) -> bool:
        """The agent answered, is listening again, and nothing of it is left to play."""
        return (
            self.conv.state not in _BUSY
            and self.speaker.idle
            and self.conv.has_turn_reply()
            and not self.mic.speaking
        )

    async def turn(
        self, turn_no: int, text: str, *, cut_in: bool = False, leave_after: float | None = None
    ) -> tuple[list[TranscriptItem], float]:
        """Speak ``text`` and wait for the agent's answer; returns the turn's items and seconds.

        ``cut_in``: speak at once (the previous turn left while the agent was talking) instead
        of after the caller's pause. ``leave_after``: the next line interrupts this turn's
        reply, so return once that reply has played that many seconds.
        """
        conv = self.conv
        pcm = await self.settings.speak(text)
        if not cut_in:
            await asyncio.sleep(self.settings.caller_pause)
        marks = (len(self.heard.finals), len(self.heard.user_items), len(self.heard.chat_items))
        clears = sum(1 for r in self.speaker.replies if r.cleared is not None)
        conv.begin_turn(turn_no)
        if self.settings.before_line is not None:
            self.settings.before_line(text)
        line = self.mic.say(text, pcm)
        started = time.monotonic()
        deadline = started + line.seconds + conv.turn_timeout
        if not await conv.wait_until(line.done.is_set, deadline):
            raise conv.turn_failed(turn_no, text, "the caller's line never finished playing")
        assert line.stopped is not None
        stop = line.stopped
        done = self.reply_done if leave_after is None else self._played_for(stop, leave_after)
        answered = await self._wait_answer(done, stop + conv.turn_timeout)
        items = self._items(turn_no, text, marks)
        if not answered and not self._heard_anything(marks):
            raise conv.turn_failed(
                turn_no,
                text,
                with_load(
                    f"the agent did not hear turn {turn_no} within {conv.turn_timeout:g}s of the "
                    f"caller's line ending (no transcript; --turn-timeout); {conv.last_seen()}"
                ),
            )
        conv.last_metrics = self._metrics(turn_no, line, marks, clears, time.monotonic() - stop)
        return items, time.monotonic() - started

    async def _wait_answer(self, done: Callable[[], bool], deadline: float) -> bool:
        """Wait for ``done``, then for it to hold through a short quiet spell (a tool call or
        a second message would break it)."""
        conv = self.conv
        while await conv.wait_until(done, deadline):
            settle = min(deadline, time.monotonic() + _SETTLE)
            if not await conv.wait_until(lambda: not done(), settle):
                return True
        return False

    def _played_for(self, stop: float, seconds: float) -> Callable[[], bool]:
        """Done once the first reply after ``stop`` has played ``seconds`` (or is over)."""

        def played() -> bool:
            reply = self.speaker.first_audio_after(stop)
            if reply is None:
                return False
            if time.monotonic() >= reply.starts + seconds:
                return True
            self._wake_at(reply.starts + seconds)
            return self.reply_done()

        return played

    async def listened(self, turns: list[TurnMetrics]) -> list[TurnMetrics]:
        """``turns`` with what a caller heard of each spoken turn's reply (``--listen``), once
        the call is over (so no transcription delays a line). A reply a later line cut into
        is heard up to where the agent stopped it."""
        listen = self.settings.listen
        if listen is None:
            return turns
        out = []
        for metrics in turns:
            replies = self._played.get(metrics.turn, [])
            if metrics.mode == "audio" and replies:
                heard = []
                for reply in replies:
                    pcm = reply.played_pcm()
                    heard.append(await listen(pcm, reply.rate) if pcm else "")
                text = " ".join(h for h in heard if h)
                metrics = dataclasses.replace(metrics, agent_heard=text)
            out.append(metrics)
        return out

    def _wake_at(self, at: float) -> None:
        loop = asyncio.get_running_loop()
        loop.call_at(max(loop.time(), at), self.conv.wake)

    def _heard_anything(self, marks: tuple[int, int, int]) -> bool:
        return len(self.heard.finals) > marks[0] or len(self.heard.user_items) > marks[1]

    def heard_text(self, marks: tuple[int, int, int]) -> str:
        """What the agent heard since ``marks``: its user message(s), else its final
        transcripts (an agent may transcribe without committing a user turn)."""
        users = [t for _, t in self.heard.user_items[marks[1] :] if t.strip()]
        if users:
            return " ".join(users)
        return " ".join(t for _, t in self.heard.finals[marks[0] :] if t.strip())

    def _items(self, turn_no: int, said: str, marks: tuple[int, int, int]) -> list[TranscriptItem]:
        heard = self.heard_text(marks)
        user = TranscriptItem(kind="message", turn=turn_no, role="user", text=heard, said=said)
        return [user, *self.conv.take_turn_items()]

    def _metrics(
        self,
        turn_no: int,
        line: SpokenLine,
        marks: tuple[int, int, int],
        clears: int,
        elapsed: float,
    ) -> TurnMetrics:
        assert line.started is not None and line.stopped is not None
        chat = [item for _, item in self.heard.chat_items[marks[2] :]]
        base = measure_turn(turn_no, elapsed, [i for i in chat if not _cut_reply(i)])
        heard = self.heard_text(marks)
        reply = self.speaker.first_audio_after(line.stopped)
        first_audio = None if reply is None else round((reply.arrived - line.stopped) * 1000, 3)
        cut = [r for r in self.speaker.replies if r.cleared is not None][clears:]
        stopped = None
        if cut and cut[0].cleared is not None and cut[0].cleared >= line.started:
            stopped = round((cut[0].cleared - line.started) * 1000, 3)
        eot, stt = _user_delays(chat)
        played = [r for r in self.speaker.replies if r.arrived >= line.stopped]
        self._played[turn_no] = played
        return dataclasses.replace(
            base,
            # an audio turn's latency is the caller's wait: stopped speaking -> agent's audio
            latency_ms=first_audio if first_audio is not None else base.latency_ms,
            mode="audio",
            first_audio_ms=first_audio,
            end_of_turn_ms=eot,
            transcription_ms=stt,
            said=line.text,
            heard=heard,
            wer=word_error_rate(line.text, heard),
            agent_audio_s=round(sum(r.ends - r.starts for r in played), 3) if played else None,
            interrupted_agent=stopped is not None,
            agent_stopped_ms=stopped,
            false_interruptions=sum(1 for t in self.heard.false_interruptions if t >= line.started),
            overlaps=sum(1 for t in self.heard.overlaps if t >= line.started),
            load=_load(),
        )


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _cut_reply(item: pb.ChatContext.ChatItem) -> bool:
    """The agent's reply that a line cut into (its metrics are not this turn's)."""
    return item.WhichOneof("item") == "message" and item.message.interrupted


def _user_delays(chat: list[pb.ChatContext.ChatItem]) -> tuple[float | None, float | None]:
    """The user message's ``end_of_turn_delay`` and ``transcription_delay`` in ms."""
    for item in chat:
        if item.WhichOneof("item") == "message" and item.message.role == pb.USER:
            m = item.message.metrics
            eot = round(m.end_of_turn_delay * 1000, 3) if m.HasField("end_of_turn_delay") else None
            stt = (
                round(m.transcription_delay * 1000, 3)
                if m.HasField("transcription_delay")
                else None
            )
            return eot, stt
    return None, None
