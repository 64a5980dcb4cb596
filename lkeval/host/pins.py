"""What a speed patch checks before it touches livekit-agents (or HTTPX): the source of each
function it wraps or replaces, against the digests read in the releases CI installs.

Runs in the agent process and the fork server (loaded by path by ``agent_host.py`` and
``fork_server.py`` before the patches, so it imports nothing of lk-eval). Why: a patch is only
right for the code it was written against. Pinning whole module files turned a patch off on
every release that touched an unrelated line of the file (the tool-schema pin matched one of the
supported releases); pinning the functions themselves keeps it on wherever they read as they
did, and a function that changed turns it off with a note that names it. The source text
(as ``inspect.getsource`` gives it) is the pin, not the bytecode, which changes with the
Python version.

Each patch says whether it is on and why (:class:`Note`): the host sends the notes to lk-eval
with ``prepared``, which prints them once at the run's start and keeps them in each attempt.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import linecache
import tokenize
import types
from collections.abc import Mapping
from typing import Any, NamedTuple


class Note(NamedTuple):
    """Whether a patch is on, and why (one phrase: what was verified, or what stopped it)."""

    on: bool
    why: str

    def describe(self) -> str:
        return f"{'on' if self.on else 'off'} ({self.why})"


@functools.cache
def source_digest(function: Any) -> str | None:
    """A digest of ``function``'s source text (a function, method or code object), or None
    when it cannot be read (no source shipped, a builtin). Kept per function object: the fork
    server reads them once, before it forks (another object, a replaced function, is read
    again).

    The text is what ``inspect.getsource`` gives (the block from its first decorator), read
    from the code object's own file and line: ``inspect.getsource`` itself first looks for the
    function's module by resolving the path of every module loaded (~25 ms a function with
    livekit-agents imported, in every cold agent).
    """
    code = getattr(inspect.unwrap(function), "__code__", function)
    if not isinstance(code, types.CodeType):
        return None
    lines = linecache.getlines(code.co_filename)
    try:
        block = inspect.getblock(lines[code.co_firstlineno - 1 :])
    except (SyntaxError, tokenize.TokenError, IndexError):
        return None
    if not block:
        return None
    return hashlib.sha256("".join(block).encode()).hexdigest()[:16]


def check(functions: Mapping[str, Any], verified: Mapping[str, Mapping[str, str]]) -> Note:
    """On when each of ``functions`` (name -> function) reads as it did in one of the releases
    of ``verified`` (release -> name -> digest, oldest first); off naming those that changed."""
    changed = [
        name
        for name, function in functions.items()
        if source_digest(function) not in {each.get(name) for each in verified.values()}
    ]
    if changed:
        newest = list(verified)[-1] if verified else "any verified release"
        return Note(False, f"{', '.join(changed)} changed since {newest}")
    return Note(True, f"verified {', '.join(functions)}")


if __name__ == "__main__":  # print the digests of the functions named (module:qualname ...)
    import importlib
    import sys

    for spec in sys.argv[1:]:
        module, _, qualname = spec.partition(":")
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
        print(spec, source_digest(found), file=sys.stdout)
