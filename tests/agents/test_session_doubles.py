"""The replayable greeting burst (tests/agent_session.py) really arrives within one tick.

A real agent's turn 0 (session-start handoff, thinking -> listening -> speaking, the greeting,
-> listening) can reach lk-eval's reader all at once. This stand-in console writes the same
events (checked against the real agent in test_agent_doubles.py) in one write, so a unit test
of a wait on agent state can get the burst deterministically, without booting an agent.
"""

from __future__ import annotations

import asyncio

from agent_session import dial, greeting_burst, send_at_once

from lkeval.agents.protocol import SessionListener


def test_whole_greeting_burst_is_dispatched_in_one_tick() -> None:
    async def scenario() -> list[bool]:
        listener = SessionListener()
        writer = await dial(await listener.start())
        conn = await listener.accepted
        loop = asyncio.get_running_loop()
        tick_passed: list[bool] = []
        marker = asyncio.Event()

        def on_event(_: object) -> None:
            if not tick_passed:
                loop.call_soon(marker.set)  # runs only once the reader yields to the loop
            tick_passed.append(marker.is_set())

        conn.on_event(on_event)
        await send_at_once(writer, greeting_burst())
        while len(conn.events) < 6 and await conn.wait_event(10):
            pass
        writer.close()
        await conn.close()
        return tick_passed

    seen = asyncio.run(scenario())
    assert seen == [False] * 6
