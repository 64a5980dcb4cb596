"""The session-host side of the console protocol, against a console peer speaking real frames."""

from __future__ import annotations

import asyncio
import socket
import struct
from pathlib import Path

import pytest
from livekit.protocol.agent_pb import agent_session as pb

from lkeval.agents.process import AgentLaunch, AgentProcess
from lkeval.agents.protocol import (
    MAX_INBOUND_FRAME,
    FrameTooLarge,
    ProtocolError,
    SessionListener,
)
from lkeval.run.conversation import AgentEndedSession, Conversation


async def _peer(addr: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = addr.rsplit(":", 1)
    return await asyncio.open_connection(host, int(port))


async def _read(reader: asyncio.StreamReader) -> pb.AgentSessionMessage:
    (length,) = struct.unpack(">I", await reader.readexactly(4))
    msg = pb.AgentSessionMessage()
    msg.ParseFromString(await reader.readexactly(length))
    return msg


def _send(writer: asyncio.StreamWriter, msg: pb.AgentSessionMessage) -> None:
    data = msg.SerializeToString()
    writer.write(struct.pack(">I", len(data)) + data)


def test_listens_on_loopback_accepts_one_and_answers_by_request_id() -> None:
    async def scenario() -> None:
        listener = SessionListener()
        addr = await listener.start()
        assert addr.startswith("127.0.0.1:")
        reader, writer = await _peer(addr)
        # an event before any request (a greeting) is kept
        _send(
            writer,
            pb.AgentSessionMessage(
                event=pb.AgentSessionEvent(
                    agent_state_changed=pb.AgentSessionEvent.AgentStateChanged(
                        new_state=pb.AS_SPEAKING
                    )
                )
            ),
        )
        conn = await asyncio.wait_for(listener.accepted, 5)
        # the listener is closed after the first connection
        with pytest.raises(OSError):
            await asyncio.wait_for(_peer(addr), 2)

        async def console() -> None:
            req = (await _read(reader)).request
            assert req.WhichOneof("request") == "ping"
            _send(
                writer,
                pb.AgentSessionMessage(
                    response=pb.SessionResponse(
                        request_id=req.request_id, pong=pb.SessionResponse.Pong()
                    )
                ),
            )
            # a large inbound frame (> 1 MiB) is accepted
            big = "x" * (3 * 1024 * 1024)
            req = (await _read(reader)).request
            item = pb.ChatContext.ChatItem(
                message=pb.ChatMessage(
                    role=pb.ASSISTANT, content=[pb.ChatMessage.ChatContent(text=big)]
                )
            )
            _send(
                writer,
                pb.AgentSessionMessage(
                    response=pb.SessionResponse(
                        request_id=req.request_id,
                        run_input=pb.SessionResponse.RunInputResponse(items=[item]),
                    )
                ),
            )
            await writer.drain()

        task = asyncio.create_task(console())
        pong = await conn.request(pb.SessionRequest(ping=pb.SessionRequest.Ping()), 5)
        assert pong.HasField("pong")
        resp = await conn.request(
            pb.SessionRequest(run_input=pb.SessionRequest.RunInput(text="hi")), 5
        )
        assert len(resp.run_input.items[0].message.content[0].text) == 3 * 1024 * 1024
        await task
        assert conn.events[0].event.agent_state_changed.new_state == pb.AS_SPEAKING
        writer.close()
        await conn.close()

    asyncio.run(scenario())


def test_never_sends_a_frame_over_one_mebibyte_and_times_out_cleanly() -> None:
    async def scenario() -> None:
        listener = SessionListener()
        addr = await listener.start()
        reader, writer = await _peer(addr)
        conn = await asyncio.wait_for(listener.accepted, 5)
        huge = "y" * (1024 * 1024 + 10)
        with pytest.raises(FrameTooLarge, match="1 MiB"):
            await conn.request(
                pb.SessionRequest(run_input=pb.SessionRequest.RunInput(text=huge)), 1
            )
        with pytest.raises(ProtocolError, match="no answer within"):
            await conn.request(pb.SessionRequest(ping=pb.SessionRequest.Ping()), 0.2)

        # an error answer raises with the agent's message
        async def console() -> None:
            req = (await _read(reader)).request
            if req.WhichOneof("request") == "ping":  # the timed-out ping
                req = (await _read(reader)).request
            _send(
                writer,
                pb.AgentSessionMessage(
                    response=pb.SessionResponse(request_id=req.request_id, error="LLM failed")
                ),
            )

        task = asyncio.create_task(console())
        with pytest.raises(ProtocolError, match="LLM failed"):
            await conn.request(pb.SessionRequest(run_input=pb.SessionRequest.RunInput(text="a")), 5)
        await task
        # the peer hanging up fails pending and later requests at once
        closed = asyncio.Event()
        conn.on_close(closed.set)
        writer.close()
        await asyncio.wait_for(closed.wait(), 60)  # the reader saw the end of the stream
        assert conn.closed_reason is not None
        with pytest.raises(ProtocolError, match="closed"):
            await conn.request(pb.SessionRequest(ping=pb.SessionRequest.Ping()), 5)
        await conn.close()

    asyncio.run(scenario())


def test_a_frame_over_the_inbound_limit_is_reported_as_that(tmp_path: Path) -> None:
    """Not as "the agent ended the session": lk-eval dropped the connection, the agent did not."""

    async def scenario() -> None:
        listener = SessionListener()
        addr = await listener.start()
        reader, writer = await _peer(addr)
        conn = await asyncio.wait_for(listener.accepted, 5)
        sleeper = await asyncio.create_subprocess_exec("sleep", "30")
        agent = AgentProcess(AgentLaunch(tmp_path / "agent.py"), "{}", tmp_path / "agent.log")
        agent.proc = sleeper  # the agent process is alive throughout
        conv = Conversation(conn, agent, turn_timeout=10)

        async def console() -> None:
            await _read(reader)  # the turn's run_input
            writer.write(struct.pack(">I", MAX_INBOUND_FRAME + 1))
            await writer.drain()

        task = asyncio.create_task(console())
        try:
            with pytest.raises(ProtocolError, match="over lk-eval's inbound limit") as info:
                await conv.turn(1, "hello")
            assert not isinstance(info.value, AgentEndedSession)
            assert conn.fault is not None and conn.closed_reason == conn.fault
            await task
        finally:
            sleeper.kill()
            await sleeper.wait()
            writer.close()
            await conn.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("how", ["close", "reset"])
def test_an_agent_that_goes_away_reads_the_same_whether_its_socket_sent_fin_or_rst(
    how: str,
) -> None:
    """Timing alone picks FIN or RST when an agent exits with our request unread; a report
    must not change with it (a stable reason for the same broken agent)."""

    async def scenario() -> None:
        listener = SessionListener()
        addr = await listener.start()
        reader, writer = await _peer(addr)
        conn = await asyncio.wait_for(listener.accepted, 5)
        request = asyncio.create_task(
            conn.request(pb.SessionRequest(ping=pb.SessionRequest.Ping()), 5)
        )
        await _read(reader)  # the request reached the agent, which never answers it
        if how == "reset":  # SO_LINGER 0: close() sends RST, as a dying process's socket may
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.close()
        with pytest.raises(ProtocolError, match="the agent closed the connection"):
            await request
        assert conn.closed_reason == "the agent closed the connection"
        await conn.close()

    asyncio.run(scenario())
