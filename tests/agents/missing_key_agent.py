"""A test agent whose entrypoint builds an OpenAI LLM with no API key in its environment:
``openai.OpenAIError`` (missing credentials) is raised inside the job, which crashes."""

from __future__ import annotations

from livekit.agents import Agent, AgentServer, AgentSession, JobContext
from livekit.plugins import openai

server = AgentServer()


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    session: AgentSession[None] = AgentSession(llm=openai.LLM(model="missing-key"))
    await session.start(agent=Agent(instructions="You are a terse test agent."), room=ctx.room)
