"""JSON read from a file lk-eval did not necessarily write: bounded in size and depth.

Results files, cassettes and the cassettes' manifest may come from an artifact or a pull
request's tree; a reader below (the masker, the request matcher, the comparison) recurses
through what it is given, so a file nested deeper than :data:`MAX_DEPTH` is refused before any
of them sees it, and a larger one before it is parsed. One place for these bounds, so every
such file is held to the same.
"""

from __future__ import annotations

import json
from itertools import chain
from typing import Any

#: Nesting a file may have: lk-eval writes about ten levels plus the scenario's own values
#: (``userdata``, function arguments: at most 100 deep, see scenarios/bounds.py).
MAX_DEPTH = 200


class BoundsError(ValueError):
    """JSON that is too large, too deep, or not JSON; the message says which."""


def depth_over(raw: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether parsed JSON nests deeper than ``limit`` (the top is level 1): one level at a
    time, no recursion to exhaust and nothing allocated per value (a file of 20 million empty
    lists took minutes walked value by value, the collector re-scanning them meanwhile)."""
    level, depth = [raw], 1
    while containers := [v for v in level if isinstance(v, (dict, list))]:
        if depth > limit:
            return True
        level = list(
            chain.from_iterable(v.values() if isinstance(v, dict) else v for v in containers)
        )
        depth += 1
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
