"""The runner's side of LiveKit's console SessionHost protocol, over one TCP connection.

The console (inside the agent process) is the TCP *client*: it dials the address it was given
with ``--connect-addr``. So lk-eval listens on loopback, accepts exactly one connection, and
then speaks requests and reads responses and events on it. Frames are a 4-byte big-endian
length followed by a serialized ``AgentSessionMessage``.

livekit ships only the dialing side (``TcpSessionTransport``) and a client (``RemoteSession``)
that lives in ``livekit.agents``; importing that costs ~1.5 s and ~105 MB per runner, while
``livekit.protocol`` alone is ~0.05 s. The runner needs only a handful of requests, so this
small client on the protocol package is the better trade.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from livekit.protocol.agent_pb import agent_session as pb

# The agent drops its reader when it receives a frame over 1 MiB (and every later request
# then times out), so we never send one. It sends larger frames itself: accept those.
MAX_OUTBOUND_FRAME = 1024 * 1024
MAX_INBOUND_FRAME = 64 * 1024 * 1024
_HEADER = struct.Struct(">I")


class ProtocolError(Exception):
    """The connection broke, a request timed out, or the agent answered with an error."""


class FrameTooLarge(ProtocolError):
    """A request would exceed the agent's 1 MiB inbound frame limit."""


@dataclass(frozen=True)
class ReceivedEvent:
    """An event from the agent, with the monotonic time it arrived."""

    at: float
    event: pb.AgentSessionEvent


class AudioSink(Protocol):
    """Where the agent's audio goes in audio mode (lk-eval's speaker, ``run/audio_line.py``).

    Called from the connection's reader, in wire order, at the monotonic time each message
    arrived: the agent's audio frames, the end of a reply (``audio_playback_flush``: the
    sink must answer with :meth:`SessionConnection.playback_finished` once the audio would
    have played out, or the agent's turn never completes), and ``audio_playback_clear`` (the
    agent was interrupted: what it sent and did not flush will not be played).
    """

    def on_audio(self, pcm: bytes, sample_rate: int, at: float) -> None: ...

    def on_flush(self, at: float) -> None: ...

    def on_clear(self, at: float) -> None: ...


class SessionConnection:
    """One accepted console connection: requests with timeouts, and a log of events.

    Events arrive at any time, also before the first request (an ``on_enter`` greeting), so a
    reader task collects them from the moment of accept; ``events`` keeps them all in order.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future[pb.SessionResponse]] = {}
        self.events: list[ReceivedEvent] = []
        self._event_waiters: list[asyncio.Future[None]] = []
        self._closed_reason: str | None = None
        self._fault: str | None = None
        self._listeners: list[Callable[[pb.AgentSessionEvent], None]] = []
        self._close_listeners: list[Callable[[], None]] = []
        self._audio_sink: AudioSink | None = None
        self._read_task = asyncio.create_task(self._read_loop(), name="lkeval-session-reader")

    @property
    def closed_reason(self) -> str | None:
        """Why the connection ended, or None while it is open."""
        return self._closed_reason

    @property
    def fault(self) -> str | None:
        """Set when lk-eval dropped the connection because the agent broke the protocol (a
        frame over the inbound limit, a frame that does not parse): that is not the agent
        ending its session, and must not be reported as one."""
        return self._fault

    def on_event(self, listener: Callable[[pb.AgentSessionEvent], None]) -> None:
        """Call ``listener`` for every event from now on."""
        self._listeners.append(listener)

    def attach_audio(self, sink: AudioSink) -> None:
        """Send the agent's audio to ``sink`` from now on; it then answers playback flushes."""
        self._audio_sink = sink

    def send_audio(self, pcm: bytes, sample_rate: int) -> None:
        """Queue one microphone frame (mono s16le) for the agent; a closed connection drops
        it (the next request reports the close)."""
        if self._closed_reason is not None or self._writer.is_closing():
            return
        frame = pb.AgentSessionMessage.ConsoleIO.AudioFrame(
            data=pcm, sample_rate=sample_rate, num_channels=1, samples_per_channel=len(pcm) // 2
        )
        self._write(pb.AgentSessionMessage(audio_input=frame))

    async def drain(self) -> None:
        """Wait until what was queued for the agent has been handed to the socket."""
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.drain()

    def playback_finished(self) -> None:
        """Tell the agent its reply has played out (the answer to ``audio_playback_flush``)."""
        if self._closed_reason is None and not self._writer.is_closing():
            finished = pb.AgentSessionMessage.ConsoleIO.AudioPlaybackFinished()
            self._write(pb.AgentSessionMessage(audio_playback_finished=finished))

    def _write(self, msg: pb.AgentSessionMessage) -> None:
        payload = msg.SerializeToString()
        self._writer.write(_HEADER.pack(len(payload)) + payload)

    def on_close(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` once the connection ends (whoever ended it)."""
        self._close_listeners.append(listener)

    async def wait_event(self, timeout: float) -> bool:
        """Wait until the next event arrives (True) or the timeout passes (False)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._event_waiters.append(fut)
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            with contextlib.suppress(ValueError):
                self._event_waiters.remove(fut)

    async def request(self, request: pb.SessionRequest, timeout: float) -> pb.SessionResponse:
        """Send one request and wait for its response; an ``error`` answer raises."""
        response = await self.request_raw(request, timeout)
        if response.HasField("error") and response.error:
            raise ProtocolError(f"agent answered with an error: {response.error}")
        return response

    async def request_raw(self, request: pb.SessionRequest, timeout: float) -> pb.SessionResponse:
        """Send one request and return its response as is (the caller reads ``error``)."""
        if self._closed_reason is not None:
            raise ProtocolError(f"connection to the agent is closed: {self._closed_reason}")
        request_id = f"lkeval-{next(self._ids)}"
        request.request_id = request_id
        payload = pb.AgentSessionMessage(request=request).SerializeToString()
        if len(payload) > MAX_OUTBOUND_FRAME:
            raise FrameTooLarge(
                f"request of {len(payload)} bytes exceeds the agent's 1 MiB frame limit "
                "(the agent would silently stop reading); shorten the turn text"
            )
        fut: asyncio.Future[pb.SessionResponse] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = fut
        try:
            self._writer.write(_HEADER.pack(len(payload)) + payload)
            await self._writer.drain()
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            kind = request.WhichOneof("request")
            raise ProtocolError(f"{kind} got no answer within {timeout:g}s") from None
        except (ConnectionError, OSError) as exc:
            raise ProtocolError(f"connection to the agent broke: {exc}") from None
        finally:
            self._pending.pop(request_id, None)

    async def _read_loop(self) -> None:
        reason = "the agent closed the connection"
        try:
            while True:
                header = await self._reader.readexactly(_HEADER.size)
                (length,) = _HEADER.unpack(header)
                if length > MAX_INBOUND_FRAME:
                    reason = self._fault = (
                        f"the agent sent a frame of {length} bytes, over lk-eval's inbound "
                        f"limit of {MAX_INBOUND_FRAME} bytes; the connection was dropped"
                    )
                    break
                data = await self._reader.readexactly(length)
                msg = pb.AgentSessionMessage()
                msg.ParseFromString(data)
                await self._dispatch(msg)
        except (asyncio.IncompleteReadError, ConnectionResetError):
            # A reset is the agent closing too: its socket went away with our last request
            # unread (timing alone picks FIN or RST), so both read the same in a report.
            pass
        except (ConnectionError, OSError) as exc:
            reason = f"connection error: {exc}"
        except asyncio.CancelledError:
            reason = "closed by lk-eval"
            raise
        except Exception as exc:  # a frame that does not parse
            reason = self._fault = f"unreadable frame from the agent: {exc}"
        finally:
            self._closed_reason = reason
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(ProtocolError(f"connection ended: {reason}"))
            self._wake_event_waiters()
            for listener in self._close_listeners:
                listener()

    async def _dispatch(self, msg: pb.AgentSessionMessage) -> None:
        which = msg.WhichOneof("message")
        if which == "response":
            fut = self._pending.get(msg.response.request_id)
            if fut is not None and not fut.done():
                fut.set_result(msg.response)
        elif which == "event":
            self.events.append(ReceivedEvent(asyncio.get_running_loop().time(), msg.event))
            for listener in self._listeners:
                listener(msg.event)
            self._wake_event_waiters()
        elif which in ("audio_output", "audio_playback_flush", "audio_playback_clear"):
            await self._on_audio(msg, which)

    async def _on_audio(self, msg: pb.AgentSessionMessage, which: str) -> None:
        sink, at = self._audio_sink, asyncio.get_running_loop().time()
        if sink is None:
            # In text mode no audio flows; should an agent still flush, the turn only
            # completes once we say playback finished.
            if which == "audio_playback_flush":
                self.playback_finished()
                await self._writer.drain()
        elif which == "audio_output":
            sink.on_audio(msg.audio_output.data, msg.audio_output.sample_rate, at)
        elif which == "audio_playback_flush":
            sink.on_flush(at)
        else:
            sink.on_clear(at)

    def _wake_event_waiters(self) -> None:
        for fut in self._event_waiters:
            if not fut.done():
                fut.set_result(None)

    async def close(self) -> None:
        """Close the connection (this does not stop the agent process)."""
        self._read_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._read_task
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()


class SessionListener:
    """Listens on 127.0.0.1 (any free port) and accepts exactly one console connection."""

    def __init__(self) -> None:
        self._server: asyncio.base_events.Server | None = None
        self._accepted: asyncio.Future[SessionConnection] | None = None
        self.port = 0

    async def start(self) -> str:
        """Start listening; returns the ``HOST:PORT`` to pass as ``--connect-addr``."""
        loop = asyncio.get_running_loop()
        self._accepted = loop.create_future()
        self._server = await asyncio.start_server(self._on_connect, host="127.0.0.1", port=0)
        self.port = self._server.sockets[0].getsockname()[1]
        return f"127.0.0.1:{self.port}"

    def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._accepted is not None
        if self._accepted.done():
            writer.close()  # exactly one agent per listener
            return
        self._accepted.set_result(SessionConnection(reader, writer))
        self.stop()

    @property
    def accepted(self) -> asyncio.Future[SessionConnection]:
        """Resolves with the connection once the agent dials in."""
        assert self._accepted is not None, "start() first"
        return self._accepted

    def stop(self) -> None:
        """Stop listening (idempotent)."""
        if self._server is not None:
            self._server.close()
            self._server = None
