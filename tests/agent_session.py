"""Drive one test agent through lk-eval's own agent launcher and protocol, at the lowest level.

The e2e tests of the agent doubles (tests/agents/) use this to show what each agent really does
on the wire: which events arrive, when the session closes, what ``finalize_simulation`` says.
They go through :class:`lkeval.agents.process.AgentProcess` (the same spawn path and agent host
as ``lkeval run``) and :class:`lkeval.agents.protocol.SessionConnection`, not through the engine, so
they document the agents rather than lk-eval's current verdicts on them.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conftest import clean_env
from google.protobuf import json_format
from livekit.protocol import agent_simulation as sim_pb
from livekit.protocol.agent_pb import agent_session as pb

from lkeval.agents.process import AgentLaunch, AgentProcess
from lkeval.agents.protocol import SessionConnection

BOOT_TIMEOUT = 90.0  # generous: the machine is shared and loaded


def dispatch(userdata: Mapping[str, Any] | None = None, instructions: str = "") -> str:
    """The protojson ``SimulationDispatch`` LiveKit's simulator attaches to the job."""
    proto = sim_pb.SimulationDispatch(
        simulation_run_id="run-doubles",
        job_id="job-doubles",
        mode=sim_pb.SimulationMode.SIMULATION_MODE_TEXT,
        scenario=sim_pb.Scenario(
            id="s1",
            label="doubles",
            instructions=instructions,
            userdata=json.dumps(userdata) if userdata else "",
        ),
    )
    return json_format.MessageToJson(proto, indent=None)


def closed_port_url() -> str:
    """An http URL on loopback where nothing listens: an unreachable LLM."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@dataclass
class Booted:
    """A running agent and its console connection."""

    agent: AgentProcess
    conn: SessionConnection
    log_path: Path

    def kinds(self) -> list[str]:
        """The kind of each event so far (``agent_state_changed``, ``error``, ...)."""
        return [str(e.event.WhichOneof("event")) for e in self.conn.events]

    def messages(self, role: str = "ASSISTANT") -> list[str]:
        """Text of every chat message of ``role`` the agent announced, in order."""
        out = []
        for e in self.conn.events:
            if e.event.WhichOneof("event") != "conversation_item_added":
                continue
            item = e.event.conversation_item_added.item
            if item.WhichOneof("item") == "message" and pb.ChatRole.Name(item.message.role) == role:
                out.append("".join(c.text for c in item.message.content))
        return out

    def log(self) -> str:
        """The agent's whole log (console output at DEBUG)."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    async def until(self, seen: Callable[[Booted], bool], timeout: float = 60.0) -> bool:
        """Wait until ``seen(self)`` holds (True) or the connection ends/the timeout passes."""
        deadline = time.monotonic() + timeout
        while not seen(self):
            left = deadline - time.monotonic()
            if left <= 0 or self.conn.closed_reason is not None:
                return seen(self)
            await self.conn.wait_event(min(left, 0.5))
        return True

    async def say(self, text: str, timeout: float = 60.0) -> pb.SessionResponse:
        """One caller turn; returns the raw response (its ``error`` unchecked)."""
        return await self.conn.request_raw(
            pb.SessionRequest(run_input=pb.SessionRequest.RunInput(text=text)), timeout
        )

    async def finalize(self, timeout: float = 60.0) -> pb.SessionResponse:
        """``finalize_simulation`` (runs the agent's ``on_simulation_end``) as answered."""
        return await self.conn.request_raw(
            pb.SessionRequest(finalize_simulation=pb.SessionRequest.FinalizeSimulation()),
            timeout,
        )


@asynccontextmanager
async def booted(
    agent: Path,
    tmp_path: Path,
    env: Mapping[str, str] | None = None,
    userdata: Mapping[str, Any] | None = None,
    cwd: Path | None = None,
    stop_grace: float = 10.0,
) -> AsyncIterator[Booted]:
    """Boot ``agent`` as ``lkeval run`` does (cold) and yield it connected; stop it after."""
    dispatch_file = tmp_path / f"{agent.stem}.dispatch.json"
    dispatch_file.write_text(dispatch(userdata), encoding="utf-8")
    log_path = tmp_path / f"{agent.stem}.log"
    if cwd is None:  # agents write files in their working directory: keep them in tmp_path
        cwd = tmp_path / f"{agent.parent.name}-{agent.stem}-cwd"
        cwd.mkdir(exist_ok=True)
    launch = AgentLaunch(agent=agent, cwd=cwd, env=dict(env or {}))
    process = AgentProcess(launch, dispatch_file, log_path)
    saved = _swap_environ(clean_env())
    try:
        conn = await process.start(BOOT_TIMEOUT)
    except BaseException:
        await process.stop(stop_grace)  # a failed boot must not leave the agent running
        raise
    finally:
        _swap_environ(saved)
    try:
        yield Booted(process, conn, log_path)
    finally:
        await conn.close()
        await process.stop(stop_grace)


def _swap_environ(new: dict[str, str]) -> dict[str, str]:
    """Replace os.environ (the agent inherits it) and return the old one."""
    import os

    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(new)
    return old


def run(coro: Any) -> Any:
    """Run one e2e scenario coroutine to completion."""
    return asyncio.run(coro)


def greeting_burst(
    agent_id: str = "edge_agent", text: str = "Hello!"
) -> list[pb.AgentSessionEvent]:
    """The events of a real turn 0 (tests/agents/edge_agent.py, livekit-agents 1.8.9): the
    session-start handoff (none -> ``agent_id``), states thinking -> listening -> speaking,
    the greeting message, -> listening."""
    item = pb.AgentSessionEvent.ConversationItemAdded
    handoff = item(
        item=pb.ChatContext.ChatItem(agent_handoff=pb.AgentHandoff(new_agent_id=agent_id))
    )
    message = pb.ChatMessage(
        role=pb.ChatRole.ASSISTANT, content=[pb.ChatMessage.ChatContent(text=text)]
    )
    greeting = item(item=pb.ChatContext.ChatItem(message=message))

    def state(s: int) -> pb.AgentSessionEvent:
        return pb.AgentSessionEvent(
            agent_state_changed=pb.AgentSessionEvent.AgentStateChanged(new_state=s)
        )

    return [
        pb.AgentSessionEvent(conversation_item_added=handoff),
        state(pb.AgentState.AS_THINKING),
        state(pb.AgentState.AS_LISTENING),
        state(pb.AgentState.AS_SPEAKING),
        pb.AgentSessionEvent(conversation_item_added=greeting),
        state(pb.AgentState.AS_LISTENING),
    ]


async def dial(addr: str) -> asyncio.StreamWriter:
    """A stand-in console: connect to the runner's ``HOST:PORT`` as the agent would."""
    host, port = addr.rsplit(":", 1)
    _, writer = await asyncio.open_connection(host, int(port))
    return writer


async def send_at_once(writer: asyncio.StreamWriter, events: list[pb.AgentSessionEvent]) -> None:
    """Write every event in ONE write, so the runner reads the whole burst from its buffer
    within one event-loop tick (what a loaded machine does to a real greeting burst)."""
    frames = b""
    for event in events:
        payload = pb.AgentSessionMessage(event=event).SerializeToString()
        frames += len(payload).to_bytes(4, "big") + payload
    writer.write(frames)
    await writer.drain()
