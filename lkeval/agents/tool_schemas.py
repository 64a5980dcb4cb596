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

It is pinned to the files that define the builders, as read in livekit-agents 1.6.6 and 1.8.9
(:data:`VERIFIED`, a digest of ``llm/utils.py`` and ``llm/_strict.py``): with any other files (a
release that may have changed what the builders read), or builders something else replaced, it
installs nothing and the framework's own path runs.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import inspect
import sys
from collections.abc import Callable
from typing import Any

#: :func:`fingerprint` of the livekit-agents releases whose builders were read and found pure
#: (release -> digest; only the digests are compared).
VERIFIED = {
    "1.6.6": "f372a941e6bc8e6d",
    "1.8.9": "a27d27c327e127c0",
}
#: The two builders that are wrapped, by name in ``livekit.agents.llm.utils``.
BUILDERS = ("build_strict_openai_schema", "build_legacy_openai_schema")
#: More distinct (tool, options) pairs than this and the cache starts over (an agent that
#: makes new tool objects for every request would otherwise grow it without end).
MAX_ENTRIES = 256


def fingerprint() -> str | None:
    """A digest of the two files the schema builders run (``llm/utils.py``, ``llm/_strict.py``),
    or None when they cannot be read or the builders are no longer the ones those files define
    (something replaced them at run time)."""
    try:
        from livekit.agents.llm import _strict, utils

        digest = hashlib.sha256()
        for module in (utils, _strict):
            with open(str(module.__file__), "rb") as source:
                digest.update(source.read())
        for name in BUILDERS:
            if getattr(utils, name).__code__.co_filename != utils.__file__:
                return None
    except (ImportError, AttributeError, OSError, TypeError):
        return None
    return digest.hexdigest()[:16]


def install() -> bool:
    """Wrap the builders when their source is one that was verified; True when wrapped."""
    if fingerprint() not in VERIFIED.values():
        return False
    from livekit.agents.llm import utils

    for name in BUILDERS:
        builder = getattr(utils, name)
        if not getattr(builder, "_lkeval_memo", False):
            setattr(utils, name, memoised(builder))
    return True


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


if __name__ == "__main__":  # print this livekit-agents' fingerprint (for VERIFIED)
    print(fingerprint(), file=sys.stdout)
