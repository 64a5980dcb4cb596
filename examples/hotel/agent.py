"""Example agent under test: a hotel front desk that checks availability and hands off to booking.

It is an ordinary LiveKit agent; nothing in it knows about lk-eval. Under a simulation
(``lkeval run`` or LiveKit's ``lk agent simulate``) the scenario's ``userdata`` reaches it through
``ctx.simulation_context()``, and ``on_simulation_end`` checks the bookings it made against the
scenario's ``expected_booking``, vetoing the run when they differ.

Its LLM is whatever ``OPENAI_BASE_URL`` points at: the example's local server
(``examples/hotel/llm_rules.yaml``) or a real OpenAI-compatible endpoint.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from livekit.agents import (
    Agent,
    AgentServer,
    AgentSession,
    JobContext,
    RunContext,
    SimulationContext,
    function_tool,
)
from livekit.plugins import openai

ROOMS_FREE = {"single": 3, "double": 1, "suite": 0}


@dataclass
class Desk:
    """What one conversation did: the session's userdata."""

    guest: str = ""
    bookings: list[dict[str, object]] = field(default_factory=list)


class FrontDeskAgent(Agent):
    def __init__(self) -> None:
        super().__init__(
            instructions=(
                "You are the front desk of Hotel Example. Check availability with "
                "check_availability. When the guest wants to book, hand over with "
                "transfer_to_booking."
            )
        )

    async def on_enter(self) -> None:
        await self.session.generate_reply(instructions="Greet the guest.")

    @function_tool
    async def check_availability(self, room_type: str, nights: int) -> str:
        """Check whether a room type is free for a number of nights."""
        free = ROOMS_FREE.get(room_type.lower())
        if free is None:
            raise ValueError(f"unknown room type {room_type}")
        return f"{free} {room_type} room(s) free for {nights} night(s)"

    @function_tool
    async def transfer_to_booking(self, context: RunContext[Desk]) -> tuple[Agent, str]:
        """Hand the guest over to the booking agent."""
        return BookingAgent(), "Transferring you to bookings."


class BookingAgent(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You book rooms with book_room, then confirm.")

    @function_tool
    async def book_room(
        self, context: RunContext[Desk], guest_name: str, room_type: str, nights: int
    ) -> str:
        """Book a room for the guest."""
        context.userdata.bookings.append(
            {"guest": guest_name, "room_type": room_type, "nights": nights}
        )
        return f"Booked a {room_type} room for {guest_name}, {nights} night(s)."


server = AgentServer()


async def check_bookings(sim: SimulationContext) -> None:
    """The agent's own verdict: did it book what the scenario expected?"""
    expected = sim.userdata().get("expected_booking")
    if expected is None:
        return
    desk: Desk = sim.job_context.primary_session.userdata
    if expected not in desk.bookings:
        sim.fail(f"expected booking {expected}, agent made {desk.bookings or 'none'}")


@server.rtc_session(on_simulation_end=check_bookings)
async def entrypoint(ctx: JobContext) -> None:
    desk = Desk()
    sim = ctx.simulation_context()
    if sim is not None:
        desk.guest = str(sim.userdata().get("guest", ""))
    session: AgentSession[Desk] = AgentSession(
        userdata=desk,
        llm=openai.LLM(model=os.environ.get("HOTEL_AGENT_MODEL", "gpt-4.1-mini")),
    )
    await session.start(agent=FrontDeskAgent(), room=ctx.room)
