"""lk-eval's start-up without the cyclic garbage collector's passes.

Starting a run imports lk-eval's command line and then the LLM stack its judge and caller talk
through (livekit-agents, its OpenAI plugin, the OpenAI SDK's pydantic models): hundreds of
thousands of objects, nearly all of them kept for the life of the process. Each pass the
collector makes meanwhile walks the growing heap and frees next to nothing; paused while they
load, the start-up takes ~15% less CPU (``bench/first_agent.py``, BENCHMARKS.md). The fork
server pauses it during its preload for the same reason, with its own two lines (it imports
nothing of lk-eval).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused_collections() -> Iterator[None]:
    """No cyclic garbage collection inside; the collector's state before is restored after
    (garbage made meanwhile is freed by its next pass, as usual). Nests."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


__all__ = ["paused_collections"]
