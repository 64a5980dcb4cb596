"""JSON read from a file lk-eval did not necessarily write: bounded in size and depth.

Results files, cassettes and the cassettes' manifest may come from an artifact or a pull
request's tree; a reader below (the masker, the request matcher, the comparison) recurses
through what it is given, so a file nested deeper than :data:`MAX_DEPTH` is refused before any
of them sees it, and a larger one before it is parsed. One place for these bounds, so every
such file is held to the same.
"""

from __future__ import annotations

import json
from typing import Any

#: Nesting a file may have: lk-eval writes about ten levels plus the scenario's own values
#: (``userdata``, function arguments: at most 100 deep, see scenarios/bounds.py).
MAX_DEPTH = 200


class BoundsError(ValueError):
    """JSON that is too large, too deep, or not JSON; the message says which."""


def depth_over(raw: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether parsed JSON nests deeper than ``limit`` (iterative: no recursion to exhaust)."""
    stack: list[tuple[Any, int]] = [(raw, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > limit:
                return True
            items = value.values() if isinstance(value, dict) else value
            stack.extend((item, depth + 1) for item in items)
    return False


def loads_bounded(data: bytes, max_bytes: int, max_depth: int = MAX_DEPTH) -> Any:
    """``data`` parsed, or :class:`BoundsError` saying why not (never a RecursionError)."""
    if len(data) > max_bytes:
        raise BoundsError(f"larger than {max_bytes // (1024 * 1024)} MiB")
    try:
        raw = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise BoundsError(f"nested more than {max_depth} levels deep") from None
    except UnicodeDecodeError:
        raise BoundsError("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise BoundsError(f"line {exc.lineno}: not valid JSON: {exc.msg}") from None
    if depth_over(raw, max_depth):
        raise BoundsError(f"nested more than {max_depth} levels deep")
    return raw


__all__ = ["MAX_DEPTH", "BoundsError", "depth_over", "loads_bounded"]
