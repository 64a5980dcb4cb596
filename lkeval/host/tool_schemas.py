"""Each function tool's JSON schema built once per agent process, not once per LLM request.

Runs in the agent process (loaded by ``agent_host.py`` by file path, so it imports nothing from
lk-eval). Why: livekit-agents rebuilds every tool's schema for every LLM request
(``ToolContext.parse_function_tools`` -> ``llm.utils.build_strict_openai_schema`` or
``build_legacy_openai_schema``: a pydantic model created from the function's signature and
docstring, then its JSON schema), about 1.6 ms of CPU per tool per request with the example
agent's two tools, the largest piece of a turn's own CPU after the OpenAI SDK's request
transform (``BENCHMARKS.md``, "CPU per turn, by process").

Those two builders are pure functions of the tool: what they read is the tool's name and
description (``tool.info``), its ``__name__`` and ``__doc__``, its signature (its
``__signature__``, or the wrapped function's code, defaults and annotations) and the annotations'
module. :func:`install` wraps them so that a tool's schema is built the first time and then
handed out as a deep copy of that first result, for as long as every one of those inputs is the
same object or an equal value (a tool whose description the agent changes gets a new schema).
The LLM receives byte for byte the request it would have received.

It is pinned to the functions it relies on (``pins.py``): the two builders it wraps and
``function_arguments_to_pydantic_model``, the one that reads the tool (so what :func:`inputs`
compares is still all it reads), each by the digest of its source as read in livekit-agents
1.6.6 and 1.8.9 (:data:`VERIFIED`). When one of them changed, or something else replaced a
builder, it installs nothing, the framework's own path runs, and the run's start says so.
"""

from __future__ import annotations

import copy
import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any

try:  # imported as lkeval.host.tool_schemas (tests, type checks)
    from . import pins
except ImportError:  # loaded by path in the agent's interpreter, by the host's loader
    pins = sys.modules["_lkeval_siblings"].sibling("pins")

#: The two builders that are wrapped, by name in ``livekit.agents.llm.utils``.
BUILDERS = ("build_strict_openai_schema", "build_legacy_openai_schema")
#: What is pinned: the builders and the function that reads the tool for them.
PINNED = (*BUILDERS, "function_arguments_to_pydantic_model")
#: :func:`pins.source_digest` of each pinned function, as read in the releases CI installs
#: (release -> function -> digest, oldest first).
VERIFIED = {
    "1.6.6": {
        "build_strict_openai_schema": "85826e6dfd11d703",
        "build_legacy_openai_schema": "9c1d5cf59c0d1ac8",
        "function_arguments_to_pydantic_model": "729c3341af1bff87",
    },
    "1.8.9": {
        "build_strict_openai_schema": "cc38edbdf3f58c3b",
        "build_legacy_openai_schema": "9c1d5cf59c0d1ac8",
        "function_arguments_to_pydantic_model": "85069c3359f6ffc0",
    },
}
#: More distinct (tool, options) pairs than this and the cache starts over (an agent that
#: makes new tool objects for every request would otherwise grow it without end).
MAX_ENTRIES = 256


def check() -> Any:
    """Whether the builders may be wrapped: a :class:`pins.Note`."""
    try:
        from livekit.agents.llm import utils

        functions = {name: getattr(utils, name) for name in PINNED}
    except (ImportError, AttributeError):
        return pins.Note(False, "the schema builders are not in livekit.agents.llm.utils")
    replaced = [
        name
        for name in BUILDERS
        if not getattr(functions[name], "_lkeval_memo", False)
        and getattr(getattr(functions[name], "__code__", None), "co_filename", None)
        != utils.__file__
    ]
    if replaced:
        return pins.Note(False, f"{', '.join(replaced)} replaced by something else")
    functions = {name: inspect.unwrap(f) for name, f in functions.items()}
    return pins.check(functions, VERIFIED)


def install() -> Any:
    """Wrap the builders when their source is one that was verified; the :class:`pins.Note`
    says whether they were wrapped and why."""
    note = check()
    if not note.on:
        return note
    from livekit.agents.llm import utils

    for name in BUILDERS:
        builder = getattr(utils, name)
        if not getattr(builder, "_lkeval_memo", False):
            setattr(utils, name, memoised(builder))
    return note


def memoised(build: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """``build(tool, **options)``, computed once per tool, options and :func:`inputs`."""
    cache: dict[tuple[int, tuple[tuple[str, Any], ...]], tuple[Any, tuple[Any, ...], Any]] = {}

    @functools.wraps(build)
    def schema(function_tool: Any, **options: Any) -> dict[str, Any]:
        key = (id(function_tool), tuple(sorted(options.items())))
        state = inputs(function_tool)
        hit = cache.get(key)
        # the cache holds the tool itself, so its id cannot be reused while the entry lives
        if hit is None or hit[0] is not function_tool or not same(hit[1], state):
            if len(cache) >= MAX_ENTRIES:
                cache.clear()
            hit = (function_tool, state, build(function_tool, **options))
            cache[key] = hit
        return copy.deepcopy(hit[2])

    schema._lkeval_memo = True  # type: ignore[attr-defined]
    return schema


def inputs(tool: Any) -> tuple[Any, ...]:
    """Everything of ``tool`` the builders read (see the module's docstring)."""
    info = getattr(tool, "info", None)
    wrapped = inspect.unwrap(tool) if hasattr(tool, "__wrapped__") else tool
    return (
        getattr(info, "name", None),
        getattr(info, "description", None),
        getattr(tool, "__name__", None),
        getattr(tool, "__doc__", None),
        getattr(tool, "__signature__", None),
        wrapped,
        getattr(wrapped, "__code__", None),
        getattr(wrapped, "__defaults__", None),
        getattr(wrapped, "__kwdefaults__", None),
        tuple((getattr(tool, "__annotations__", None) or {}).items()),
        getattr(wrapped, "__globals__", None),
    )


def same(before: tuple[Any, ...], now: tuple[Any, ...]) -> bool:
    """Each input is the same object, or (a string, a signature, annotations) an equal value."""
    return all(a is b or _equal(a, b) for a, b in zip(before, now, strict=True))


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # an annotation whose __eq__ raises: treat it as changed
        return False


if __name__ == "__main__":  # print this livekit-agents' digests (for VERIFIED)
    from livekit.agents.llm import utils

    for each in PINNED:
        print(each, pins.source_digest(getattr(utils, each)), file=sys.stdout)
