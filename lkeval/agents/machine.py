"""How busy the machine was, for the reason of a timeout lk-eval reached.

A boot or turn timeout is measured on lk-eval's wall clock, so it counts the time the agent (and
lk-eval itself) waited for a CPU as the agent's time. On a runner with more runnable tasks than
cores a timeout can be the machine's, not the agent's: the reason then says so, with the figure,
so a red gate caused by load reads as one (an ``error``, never ``failed``; README, boot and
turn timeouts).
"""

from __future__ import annotations

import os


def load_note() -> str:
    """``machine load average L on N cores`` (1-minute average), plus what it means when the
    machine had more runnable tasks than cores; "" where the load average is unknown."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return ""
    cores = os.cpu_count() or 1
    note = f"machine load average {load:.1f} on {cores} core(s)"
    if load > cores:
        note += (
            ": the machine was busier than its cores, so this timeout may be the machine's, not"
            " the agent's (raise it, or run fewer scenarios at once: --concurrency)"
        )
    return note


def with_load(reason: str) -> str:
    """A timeout's reason with :func:`load_note` after it."""
    note = load_note()
    return f"{reason}; {note}" if note else reason
