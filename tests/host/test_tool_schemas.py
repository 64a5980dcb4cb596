"""Tool schemas built once per agent process: the same bytes to the LLM, rebuilt when a tool
changes, and nothing installed on a livekit-agents whose builders were not verified."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import pytest
from livekit.agents import Agent, RunContext, function_tool, llm
from livekit.agents.llm import utils
from pydantic import Field

from lkeval.host import agent_host, pins, tool_schemas


class Desk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are a front desk.")

    @function_tool
    async def check_availability(self, room_type: str, nights: int = 1) -> str:
        """Check whether a room type is free.

        Args:
            room_type: single, double or suite
            nights: how many nights
        """
        return "free"

    @function_tool
    async def book_room(
        self,
        context: RunContext[Any],
        guest: Annotated[str, Field(description="the guest's full name")],
        day: Literal["today", "tomorrow"],
    ) -> str:
        """Book a room."""
        return "booked"


@function_tool
async def lookup_guest(name: str, loyalty: bool = False) -> str:
    """Find a guest by name."""
    return name


def desk_tools() -> list[Any]:
    """The desk's tools, bound to a new desk (typed loosely: livekit types them as a union)."""
    return list(Desk().tools)


def wire(tools: list[Any]) -> list[str]:
    """What goes to the LLM for these tools, strict and legacy, as JSON text."""
    context = llm.ToolContext(tools)
    return [json.dumps(context.parse_function_tools("openai", strict=s)) for s in (True, False)]


@pytest.fixture
def framework_builders(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever install() wraps is put back after the test."""
    for name in tool_schemas.BUILDERS:
        monkeypatch.setattr(utils, name, getattr(utils, name))


@pytest.mark.smoke
def test_the_installed_livekit_agents_is_one_whose_builders_were_verified() -> None:
    # CI runs this on the newest and the oldest supported livekit-agents: a release that
    # changed a pinned function fails here until it is read and its digest added to VERIFIED
    note = tool_schemas.check()
    assert note == (True, f"verified {', '.join(tool_schemas.PINNED)}")


@pytest.mark.smoke
@pytest.mark.usefixtures("framework_builders")
def test_memoised_schemas_are_the_framework_s_own_bytes_built_once_per_tool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tools = [*desk_tools(), lookup_guest]
    before = wire(tools)
    built: list[str] = []
    for name in tool_schemas.BUILDERS:
        real = getattr(utils, name)

        def counting(tool: Any, _real: Any = real, **options: Any) -> dict[str, Any]:
            built.append(tool.info.name)
            return dict(_real(tool, **options))

        monkeypatch.setattr(utils, name, counting)
    monkeypatch.setattr(tool_schemas, "check", lambda: pins.Note(True, "verified"))
    assert tool_schemas.install().on
    assert [wire(tools) for _ in range(3)] == [before] * 3
    assert sorted(built) == sorted(2 * [t.info.name for t in tools])  # once each, strict+legacy


@pytest.mark.usefixtures("framework_builders")
def test_each_request_gets_its_own_copy_and_a_changed_tool_a_new_schema() -> None:
    assert tool_schemas.install().on
    tool = next(t for t in desk_tools() if t.info.name == "check_availability")
    first = utils.build_strict_openai_schema(tool)
    first["function"]["parameters"]["properties"].clear()  # a caller that edits what it got
    assert utils.build_strict_openai_schema(tool)["function"]["parameters"]["properties"]

    tool.info.description = "Check a room, in a new wording."
    changed = utils.build_strict_openai_schema(tool)
    assert changed["function"]["description"] == "Check a room, in a new wording."

    tool.__doc__ = "Check.\n\nArgs:\n    room_type: the kind of room\n    nights: nights\n"
    redocumented = utils.build_legacy_openai_schema(tool)
    room_type = redocumented["function"]["parameters"]["properties"]["room_type"]
    assert room_type["description"] == "the kind of room"


@pytest.mark.usefixtures("framework_builders")
def test_unverified_builders_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    framework = [getattr(utils, name) for name in tool_schemas.BUILDERS]
    verified = dict(tool_schemas.VERIFIED)
    changed = {
        release: {**digests, "build_legacy_openai_schema": "0"}
        for release, digests in verified.items()
    }
    monkeypatch.setattr(tool_schemas, "VERIFIED", changed)
    newest = list(verified)[-1]
    assert tool_schemas.install() == (
        False,
        f"build_legacy_openai_schema changed since {newest}",
    )
    assert [getattr(utils, name) for name in tool_schemas.BUILDERS] == framework

    # builders something else replaced at run time are not the verified ones either
    monkeypatch.setattr(tool_schemas, "VERIFIED", verified)
    monkeypatch.setattr(utils, "build_strict_openai_schema", lambda tool: {})
    assert tool_schemas.check() == (False, "build_strict_openai_schema replaced by something else")


def test_the_host_loads_it_by_path_as_it_loads_its_other_siblings() -> None:
    assert agent_host.sibling("tool_schemas") is tool_schemas
