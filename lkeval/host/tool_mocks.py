"""A scenario's ``mock_tools:`` applied inside the agent process, the way LiveKit's own
``livekit.agents.mock_tools`` applies mocks in its test framework.

Runs in the agent process (loaded by ``agent_host.py`` by file path, so it imports nothing from
lk-eval). Why there and not in lk-eval: a tool runs in the agent process, and a tool that
touches a database or an API is made hermetic only by not running it there. LiveKit's mocks
intercept a tool's *execution* only: the LLM still sees the real tool's name, description and
parameters, so the conversation up to the call is the one production has.

The mocks arrive with lk-eval's ``go`` (``{"mock_tools": {NAME: [CASE, ...]}}``, one case =
``{"when": {ARG: VALUE} | null, "output": VALUE}`` or ``{"when": ..., "error": TEXT}``). They
are put in place when the agent's session starts (``AgentSession.start`` is wrapped), because
only then is the agent, and so its tools, known: a name that is not one of the agent's tools is
an error naming the tools it has, raised from ``start`` (the job crashes, and lk-eval reports
the line this module prints). Each case is tried in order; ``when`` matches when every argument
it names has that value (strictly: ``true`` is not ``1``); the first match answers. A call no
case matches gets a tool error saying so: the real tool never runs for a mocked name.
"""

from __future__ import annotations

import contextlib
import enum
import inspect
import json
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NoReturn

#: How the lines this module prints for lk-eval begin (``process.py`` reports them).
MARKER = "lk-eval: mock_tools:"
# The mock contexts entered for the session, never left (see _enter_mocks).
_ENTERED: list[contextlib.AbstractContextManager[None]] = []


class MockToolsError(Exception):
    """The scenario's mocks do not fit the agent (a tool it does not have)."""


def install(spec: Mapping[str, list[dict[str, Any]]]) -> None:
    """Make the agent's session start with ``spec``'s mocks in place (for its whole life)."""
    from livekit.agents import AgentSession

    original: Callable[..., Any] = AgentSession.start

    async def start(self: Any, *args: Any, **kwargs: Any) -> Any:
        agent = kwargs.get("agent", args[0] if args else None)
        _enter_mocks(self, agent, spec)
        return await original(self, *args, **kwargs)

    AgentSession.start = start  # type: ignore[method-assign]


def _enter_mocks(session: Any, agent: Any, spec: Mapping[str, list[dict[str, Any]]]) -> None:
    """Register one mock per named tool for every agent class the session may hand off to.

    LiveKit looks mocks up by the type of the session's current agent, so a handoff to
    another agent keeps the mocks. Where ``mock_tools`` takes no ``session`` (before
    livekit-agents 1.8), its context is entered and never left: the agent process runs this
    one scenario, and the session's tasks inherit the context from ``start``.
    """
    try:
        from livekit.agents import mock_tools
    except ImportError:
        _refuse("this livekit-agents has no mock_tools (LiveKit's test framework)")
    classes = _agent_classes(agent)
    tools = _known_tools(agent, classes)
    unknown = sorted(set(spec) - set(tools))
    if unknown:
        names = ", ".join(f"'{name}'" for name in unknown)
        have = ", ".join(sorted(tools)) or "none"
        _refuse(f"unknown tool {names}; the agent's tools: {have}")
    mocks = {name: make_mock(name, cases, tools[name]) for name, cases in spec.items()}
    per_session = "session" in inspect.signature(mock_tools).parameters
    for cls in classes:
        if per_session:  # livekit-agents 1.8: mocks for the session's lifetime
            mock_tools(cls, mocks, session=session)
            continue
        entered = mock_tools(cls, mocks)  # before: the test framework's context manager
        entered.__enter__()
        _ENTERED.append(entered)  # a context manager collected would be closed: mocks gone


def _refuse(message: str) -> NoReturn:
    """Say why on the line lk-eval reports, then fail the session's start (the job crashes)."""
    print(f"{MARKER} {message}", file=sys.stderr, flush=True)
    raise MockToolsError(message)


def _agent_classes(agent: Any) -> list[type]:
    """The session's first agent's class and every ``Agent`` subclass defined so far."""
    from livekit.agents import Agent

    found: list[type] = [type(agent)] if agent is not None else []
    queue: list[type] = [Agent]
    while queue:
        subclasses: list[type] = queue.pop().__subclasses__()
        for sub in subclasses:
            if sub not in found:
                found.append(sub)
            queue.append(sub)
    return found


def _known_tools(agent: Any, classes: Iterable[type]) -> dict[str, Callable[..., Any]]:
    """Tool name -> a callable with the tool's parameters: the first agent's own tools (bound,
    also those given as ``tools=[...]``), then those declared on agent classes (unbound)."""
    from livekit.agents.llm import find_function_tools

    tools: dict[str, Callable[..., Any]] = {}
    for tool in _flatten(getattr(agent, "tools", ()) or ()):
        tools.setdefault(tool.info.name, tool)
    for cls in classes:
        for tool in find_function_tools(cls):
            tools.setdefault(tool.info.name, _without_self(tool))
    return tools


def _flatten(tools: Iterable[Any]) -> Iterable[Any]:
    for tool in tools:
        info = getattr(tool, "info", None)
        if info is not None and getattr(info, "name", None):
            yield tool
        elif hasattr(tool, "tools"):  # a Toolset
            yield from _flatten(tool.tools)


def _without_self(tool: Any) -> Callable[..., Any]:
    """A class's tool as the session calls it: bound, so without its first parameter."""
    try:
        sig = inspect.signature(tool)
    except (TypeError, ValueError):
        return tool
    params = list(sig.parameters.values())

    def unbound(*args: Any, **kwargs: Any) -> Any:  # only its signature is used
        raise NotImplementedError

    unbound.__signature__ = sig.replace(parameters=params[1:])  # type: ignore[attr-defined]
    unbound.info = tool.info  # type: ignore[attr-defined]
    return unbound


def make_mock(
    name: str, cases: list[dict[str, Any]], tool: Callable[..., Any]
) -> Callable[..., Any]:
    """A callable with ``tool``'s parameters that answers from ``cases``.

    It has the real tool's signature because LiveKit passes a mock only the parameters it
    declares; the RunContext the real tool may take is passed too, and left out of matching.
    """
    from livekit.agents.llm import ToolError

    try:
        sig: inspect.Signature | None = inspect.signature(tool)
    except (TypeError, ValueError):
        sig = None
    raw = hasattr(getattr(tool, "info", None), "raw_schema")

    def mock(*args: Any, **kwargs: Any) -> Any:
        arguments = call_arguments(sig, args, kwargs, raw)
        case = pick_case(cases, arguments)
        if case is None:
            shown = json.dumps(arguments, sort_keys=True, default=str)
            raise ToolError(f"lk-eval mock_tools: no mock of '{name}' matches {shown}")
        if "error" in case:
            raise ToolError(str(case["error"]))
        output = case.get("output")
        return output if isinstance(output, str) else json.dumps(output)

    if sig is not None:
        mock.__signature__ = sig  # type: ignore[attr-defined]
    return mock


def call_arguments(
    sig: inspect.Signature | None, args: tuple[Any, ...], kwargs: dict[str, Any], raw: bool
) -> dict[str, Any]:
    """The call's arguments by name as JSON values, without the RunContext."""
    bound: dict[str, Any] = dict(kwargs)
    if sig is not None:
        with contextlib.suppress(TypeError):
            bound = dict(sig.bind_partial(*args, **kwargs).arguments)
    if raw:  # a raw-schema tool gets the LLM's arguments as one dict
        for value in bound.values():
            if isinstance(value, dict):
                return {str(k): _plain(v) for k, v in value.items()}
    return {k: _plain(v) for k, v in bound.items() if not _is_run_context(v)}


def _is_run_context(value: Any) -> bool:
    return type(value).__name__ == "RunContext" and hasattr(value, "function_call")


def _plain(value: Any) -> Any:
    """A tool argument as JSON would carry it (pydantic models, enums and dates included)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)


def pick_case(cases: list[dict[str, Any]], arguments: Mapping[str, Any]) -> dict[str, Any] | None:
    """The first case whose ``when`` the arguments satisfy (a case without ``when``: any)."""
    for case in cases:
        when = case.get("when")
        if not when or all(k in arguments and same(v, arguments[k]) for k, v in when.items()):
            return case
    return None


def same(expected: Any, actual: Any) -> bool:
    """JSON equality without Python's ``True == 1``: a boolean equals only a boolean."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected is actual
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return expected == actual
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(
            same(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(map(same, expected, actual))
    return type(expected) is type(actual) and bool(expected == actual)
