"""lk-eval's end of an audio call: a real-time microphone and a speaker, on the console wire.

The agent hears the caller the way a phone line delivers speech: a continuous stream of 20 ms
frames at the wire's rate (48 kHz mono s16le), silence between lines. It needs the stream
itself, not only the speech: frames pushed before its audio consumer starts are dropped, and its
VAD ends a turn on trailing silence. So the :class:`Microphone` sends a frame every 20 ms from
the moment the call starts, on an absolute schedule (a late tick sends what is due at once,
as a network buffer would; a stall of more than :data:`MAX_CATCH_UP` restarts the schedule
instead of bursting seconds of audio).

The agent's audio arrives faster than real time, in a burst per reply, then
``audio_playback_flush``. The :class:`Speaker` plays it out in its head: a reply starts
playing when its first frame arrives (or when the previous reply has finished, one speaker),
and the flush is answered with ``audio_playback_finished`` only when the audio would have
finished playing. An ``audio_playback_clear`` means the agent stopped itself (it was
interrupted): the reply is cut there and nothing is answered.

Both keep what happened on the wire's clock (monotonic seconds): when each caller line went out
and when each agent reply played, for the turn's timing and the call's timeline.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from lkeval.agents.protocol import SessionConnection

WIRE_RATE = 48000
FRAME_SAMPLES = WIRE_RATE // 50  # 20 ms
FRAME_BYTES = FRAME_SAMPLES * 2
FRAME_SECONDS = 0.02
#: Most the microphone catches up after its loop stalled; beyond it the schedule restarts.
MAX_CATCH_UP = 0.2
_SILENCE = bytes(FRAME_BYTES)

#: Per frame on the way to the agent: the frame, or None when the line lost it.
FrameFilter = Callable[[bytes], "bytes | None"]


@dataclass
class SpokenLine:
    """One caller line on the microphone: its text and when its first and last samples went."""

    text: str
    seconds: float
    pcm: bytes = b""
    started: float | None = None
    stopped: float | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)


class Microphone:
    """The caller's microphone: 20 ms frames in real time, the queued lines, else silence.

    ``frame_delay`` (``--impair jitter=``) says, after each frame the filter passed, how long
    the line holds it back: the frame reaches the agent at its nominal time plus that delay.
    The delays keep frames in order (a later frame is never sent before an earlier one) and
    are bounded, so the stream still averages a frame every 20 ms, as a network without a
    jitter buffer delivers it. A line's ``started``/``stopped`` stay the nominal times: when
    the caller spoke, not when the network delivered it.
    """

    def __init__(
        self,
        conn: SessionConnection,
        frame_filter: FrameFilter | None = None,
        frame_delay: Callable[[], float] | None = None,
        line_start: Callable[[bytes], None] | None = None,
    ) -> None:
        self._conn = conn
        self._filter = frame_filter
        self._delay = frame_delay
        self._line_start = line_start
        self._queue: list[tuple[SpokenLine, bytearray]] = []
        self._held: deque[tuple[float, bytes]] = deque()  # (when to send, frame), in order
        self.lines: list[SpokenLine] = []
        self.frames_sent = 0
        self.stalls = 0  # times the schedule restarted after the loop stalled
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Open the line: silence flows from now on."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="lkeval-microphone")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def say(self, text: str, pcm: bytes) -> SpokenLine:
        """Queue a line (48 kHz mono s16le) after what is queued; await its ``done``."""
        line = SpokenLine(text=text, seconds=len(pcm) / 2 / WIRE_RATE, pcm=pcm)
        self.lines.append(line)
        self._queue.append((line, bytearray(pcm)))
        return line

    @property
    def speaking(self) -> bool:
        return bool(self._queue)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            now = loop.time()
            if now - due > MAX_CATCH_UP:
                self.stalls += 1
                due = now
            if due <= now:
                self._hold(self._next_frame(due), due)
                due += FRAME_SECONDS
            self._release(now)
            await self._conn.drain()
            wake = min(due, self._held[0][0]) if self._held else due
            await asyncio.sleep(max(0.0, wake - loop.time()))

    def _next_frame(self, at: float) -> bytes:
        if not self._queue:
            return _SILENCE
        line, pcm = self._queue[0]
        if line.started is None:
            line.started = at
            if self._line_start is not None:  # before the filter sees the line's first frame
                self._line_start(bytes(pcm))
        chunk = bytes(pcm[:FRAME_BYTES])
        del pcm[:FRAME_BYTES]
        if not pcm:
            self._queue.pop(0)
            line.stopped = at + len(chunk) / 2 / WIRE_RATE
            line.done.set()
        return chunk.ljust(FRAME_BYTES, b"\0")

    def _hold(self, frame: bytes, due: float) -> None:
        """The frame through the line: lost (silence in its place, the stream goes on, as a
        jitter buffer's), and held back as long as the line delays it."""
        sent = self._filter(frame) if self._filter is not None else frame
        delay = self._delay() if self._delay is not None else 0.0
        self._held.append((due + delay, sent if sent is not None else _SILENCE))

    def _release(self, now: float) -> None:
        """Send every held frame whose time has come, in order."""
        while self._held and self._held[0][0] <= now:
            self._conn.send_audio(self._held.popleft()[1], WIRE_RATE)
            self.frames_sent += 1


@dataclass
class Reply:
    """One agent reply as the speaker played it (wire clock, seconds)."""

    arrived: float  # its first frame
    starts: float  # when it started playing (after any reply still playing)
    seconds: float = 0.0  # audio received
    flushed: float | None = None
    cleared: float | None = None  # the agent stopped it (it was interrupted)
    pcm: bytearray = field(default_factory=bytearray)
    rate: int = WIRE_RATE

    def played_pcm(self) -> bytes:
        """The audio a caller heard: all of it, or up to where the agent stopped it."""
        played = max(0, round((self.ends - self.starts) * self.rate)) * 2
        return bytes(self.pcm[:played])

    @property
    def ends(self) -> float:
        """When it stopped playing: its end, or the clear that cut it."""
        full = self.starts + self.seconds
        return min(full, max(self.starts, self.cleared)) if self.cleared is not None else full


class Speaker:
    """Collects the agent's audio and answers each flush when the reply has played out.

    Implements the connection's ``AudioSink``; ``on_change`` is called after every message, so
    a conversation waiting on the speaker is woken.
    """

    def __init__(self, conn: SessionConnection, on_change: Callable[[], None]) -> None:
        self._conn = conn
        self._on_change = on_change
        self.replies: list[Reply] = []
        self._current: Reply | None = None
        self._finish: asyncio.TimerHandle | None = None
        conn.attach_audio(self)

    @property
    def playing_until(self) -> float:
        """When the last reply ends playing (0.0 before any)."""
        return self.replies[-1].ends if self.replies else 0.0

    @property
    def idle(self) -> bool:
        """No reply is being received or waits for its playback to finish."""
        return self._current is None and self._finish is None

    def on_audio(self, pcm: bytes, sample_rate: int, at: float) -> None:
        if self._current is None:
            start = max(at, self.playing_until)
            self._current = Reply(arrived=at, starts=start, rate=sample_rate or WIRE_RATE)
            self.replies.append(self._current)
        self._current.pcm += pcm
        self._current.seconds += len(pcm) / 2 / (sample_rate or WIRE_RATE)
        self._on_change()

    def on_flush(self, at: float) -> None:
        reply, self._current = self._current, None
        if reply is None:  # a flush of nothing: answer at once
            self._conn.playback_finished()
        else:
            reply.flushed = at
            self._schedule_finish(reply)
        self._on_change()

    def on_clear(self, at: float) -> None:
        for reply in self.replies:
            if reply.cleared is None and reply.ends > at:
                reply.cleared = at
        self._current = None
        if self._finish is not None:
            self._finish.cancel()
            self._finish = None
        self._on_change()

    def _schedule_finish(self, reply: Reply) -> None:
        loop = asyncio.get_running_loop()
        if self._finish is not None:
            self._finish.cancel()

        def finished() -> None:
            self._finish = None
            self._conn.playback_finished()
            self._on_change()

        self._finish = loop.call_at(reply.ends, finished)

    def close(self) -> None:
        if self._finish is not None:
            self._finish.cancel()
            self._finish = None

    def first_audio_after(self, at: float) -> Reply | None:
        """The first reply that arrived after ``at``."""
        return next((r for r in self.replies if r.arrived >= at), None)
