"""A front-desk agent in the style of LiveKit's published examples (docs/testing.md, "What real
agents do").

What makes it realistic, and which env knob (all optional) turns each part on:

- LiveKit Inference model strings (``"openai/gpt-4.1-mini"``, plus STT/TTS strings that text
  mode never opens): tests point them at the scripted server with ``LIVEKIT_INFERENCE_URL`` and
  any non-empty ``LIVEKIT_API_KEY``/``LIVEKIT_API_SECRET``.
- Sibling modules with generic names (``context``, ``common``), imported as top-level modules.
- A per-room file in the working directory: the appointment book ``<room>.sqlite`` (the
  console's room name is the same for every scenario, so parallel scenarios sharing a
  directory share the file).
- ``on_simulation_end`` grades from userdata: it applies ``userdata.expected_state`` (a list of
  SQL statements) to a seed book, diffs it against the agent's book and vetoes on a mismatch;
  a bad statement raises, so ``finalize_simulation`` answers with an error.
- ``FRONTDESK_AWAY_TIMEOUT`` (seconds, LiveKit's default 15): ``user_away_timeout``; when the
  user goes away, the agent asks (through its LLM) whether they are still there, as LiveKit's
  inactive-user example does.
- ``FRONTDESK_NUDGE_AFTER`` (seconds, unset = off): the agent's own idle timer; after that
  much silence following its last message it says "Are you still there?".
- ``FRONTDESK_SHUTDOWN_PHRASE`` (default "please hang up"): a caller message containing it makes
  the agent call ``ctx.shutdown()`` in the middle of the conversation.
- ``FRONTDESK_INFERENCE_CLASS`` (unset = none): the LLM's ``inference_class`` (e.g.
  ``priority``), which LiveKit Inference receives as ``X-LiveKit-Inference-Priority``.
- ``FRONTDESK_SESSION_JUDGES`` (a number, unset = off): ``on_session_end`` runs a LiveKit
  ``JudgeGroup`` with that many judges at shutdown, each one LLM call in the SIGTERM grace.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from common import expected_rows, open_book, rows
from context import CallContext
from livekit.agents import (
    Agent,
    AgentServer,
    AgentSession,
    JobContext,
    RunContext,
    SimulationContext,
    function_tool,
    inference,
)
from livekit.agents.evals import (
    JudgeGroup,
    accuracy_judge,
    coherence_judge,
    conciseness_judge,
    relevancy_judge,
    safety_judge,
    task_completion_judge,
    tool_use_judge,
)
from livekit.agents.voice.events import ConversationItemAddedEvent, UserStateChangedEvent

LLM_MODEL = "openai/gpt-4.1-mini"
NUDGE = "Are you still there?"
AWAY_INSTRUCTIONS = "The user has been inactive. Politely check if the user is still present."
JUDGES = (
    task_completion_judge,
    accuracy_judge,
    tool_use_judge,
    safety_judge,
    relevancy_judge,
    coherence_judge,
    conciseness_judge,
)


def _seconds(name: str) -> float | None:
    value = os.environ.get(name, "")
    return float(value) if value else None


def _llm() -> str | inference.LLM:
    """The model string, or an Inference LLM asking for ``FRONTDESK_INFERENCE_CLASS``."""
    wanted = os.environ.get("FRONTDESK_INFERENCE_CLASS", "")
    return inference.LLM(LLM_MODEL, inference_class=wanted) if wanted else LLM_MODEL  # type: ignore[arg-type]


class FrontDesk(Agent):
    def __init__(self) -> None:
        super().__init__(
            instructions=(
                "You are the front desk of Example Clinic. Book appointments with "
                "book_appointment. Be brief."
            )
        )

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="Greet the caller.")

    @function_tool
    async def book_appointment(self, context: RunContext[CallContext], name: str, day: str) -> str:
        """Book an appointment for ``name`` on ``day``."""
        with open_book(context.userdata.db_path) as conn:
            conn.execute("INSERT INTO appointments VALUES (?, ?)", (name, day.lower()))
        context.userdata.booked.append(f"{name} on {day}")
        return f"Booked {name} on {day}."


async def grade(sim: SimulationContext) -> None:
    """The agent's own verdict: is the book what ``userdata.expected_state`` says it should be?"""
    statements = sim.userdata().get("expected_state")
    if statements is None:
        return
    call: CallContext = sim.job_context.primary_session.userdata
    expected = expected_rows(statements)  # raises on bad SQL: finalize answers with an error
    with open_book(call.db_path) as conn:
        actual = rows(conn)
    if actual != expected:
        sim.fail(f"appointment book differs: expected {expected}, found {actual}")


async def judge_at_shutdown(ctx: JobContext) -> None:
    """LiveKit's recommended post-call evaluation: several LLM judges over the transcript."""
    count = int(os.environ.get("FRONTDESK_SESSION_JUDGES") or 0)
    if not count:
        return
    group = JudgeGroup(llm=LLM_MODEL, judges=[make() for make in JUDGES[:count]])
    result = await group.evaluate(ctx.make_session_report().chat_history)
    print(f"frontdesk: session judges done: {sorted(result.judgments)}", flush=True)


server = AgentServer()


@server.rtc_session(on_simulation_end=grade, on_session_end=judge_at_shutdown)
async def entrypoint(ctx: JobContext) -> None:
    call = CallContext(db_path=Path.cwd() / f"{ctx.room.name}.sqlite")
    open_book(call.db_path).close()
    session: AgentSession[CallContext] = AgentSession(
        userdata=call,
        llm=_llm(),
        stt="deepgram/nova-3",
        tts="cartesia/sonic-2",
        user_away_timeout=_seconds("FRONTDESK_AWAY_TIMEOUT") or 15.0,
    )
    nudge_after = _seconds("FRONTDESK_NUDGE_AFTER")
    phrase = os.environ.get("FRONTDESK_SHUTDOWN_PHRASE", "please hang up").lower()
    idle: asyncio.TimerHandle | None = None

    def on_item(ev: ConversationItemAddedEvent) -> None:
        nonlocal idle
        role, text = getattr(ev.item, "role", None), (getattr(ev.item, "text_content", "") or "")
        if role == "user" and phrase in text.lower():
            ctx.shutdown(reason="the caller asked to hang up")
        if nudge_after is not None and role in ("user", "assistant"):
            if idle is not None:
                idle.cancel()
            if role == "assistant":
                idle = asyncio.get_running_loop().call_later(nudge_after, session.say, NUDGE)

    def on_user_state(ev: UserStateChangedEvent) -> None:
        if ev.new_state == "away":
            session.generate_reply(instructions=AWAY_INSTRUCTIONS)

    session.on("conversation_item_added", on_item)
    session.on("user_state_changed", on_user_state)
    await session.start(agent=FrontDesk(), room=ctx.room)
