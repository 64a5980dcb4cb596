"""Why an agent failed, in words a reader can act on: read from how its process ended and
from its log (the exception line, the job-crashed marker, the host's line when a scenario's
``mock_tools`` do not fit, a module it could not import and the ``--python`` that fixes it).

:class:`lkeval.agents.process.AgentProcess` watches the process; this module only words what
it found. Every line taken from the log is masked before it is cut.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable, Sequence
from pathlib import Path

from lkeval.host import agent_host, tool_mocks
from lkeval.text.masking import clip

#: How the reason begins when a scenario's ``mock_tools`` name a tool the agent does not have.
MOCK_TOOLS_REASON = "the scenario's mock_tools do not fit the agent:"
#: How the reason of an agent that died before it was prepared begins (import, entrypoint).
BOOT_FAILURE = "agent failed to boot:"
CRASH_MARKERS = ('"reason": "job crashed"', "reason=job crashed", "job crashed")
# A Python exception line, dotted names included: ``openai.OpenAIError: Missing credentials``,
# ``livekit.agents.cli.discover.CLIError: Could not find AgentServer``.
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit)\b:?")
_MODULE_NOT_FOUND = ("ModuleNotFoundError", "ImportError")
#: A flooding agent writes faster than its log is read: only the newest MiB is scanned.
_SCAN_BYTES = 1024 * 1024


def exit_reason(
    returncode: int, tail: Sequence[str], python: str, oom_killed: Callable[[], bool]
) -> str:
    """How the process ended (``tail``: the last lines of its log), with the exception line of
    its log if any; ``oom_killed`` is asked only when a SIGKILL needs explaining."""
    rc = returncode
    if rc == agent_host.EXIT_UNSUPPORTED:
        for line in reversed(tail):
            if agent_host.UNSUPPORTED_MARKER in line:
                return line.removeprefix("lk-eval: ")
    if rc == -signal.SIGKILL and oom_killed():
        return (
            "agent process killed by the kernel's OOM killer (the machine, or its memory "
            "cgroup, ran out of memory: run fewer at once with --concurrency, or give it "
            "more memory)"
        )
    if rc < 0:
        return f"agent process killed by signal {signal.Signals(-rc).name}"
    return f"agent process exited with code {rc}{_error_detail(tail, python)}"


def log_crashed(path: Path, offset: int) -> tuple[bool, int]:
    """(whether the log grew a job-crashed marker since ``offset``, the offset to read from
    next); a log that cannot be read has none."""
    try:
        with path.open("rb") as fh:
            end = fh.seek(0, os.SEEK_END)
            start = fh.seek(max(offset, end - _SCAN_BYTES))
            chunk = fh.read(_SCAN_BYTES)
    except OSError:
        return False, offset
    # keep a little overlap so a marker split across reads is still found
    text = chunk.decode("utf-8", errors="replace")
    return any(marker in text for marker in CRASH_MARKERS), start + max(0, len(chunk) - 64)


def crash_reason(tail: Sequence[str], python: str) -> str:
    """Why the agent's job crashed: its ``mock_tools`` did not fit, or its entrypoint raised
    (with the exception line of its log)."""
    return mock_tools_refused(tail) or (
        "the agent's job crashed (its entrypoint raised)" + _error_detail(tail, python)
    )


def mock_tools_refused(tail: Sequence[str]) -> str | None:
    """The host's line when the scenario's ``mock_tools`` do not fit the agent."""
    for line in reversed(tail):
        _, marker, why = line.partition(tool_mocks.MARKER)
        if marker:
            return clip(f"{MOCK_TOOLS_REASON} {why.strip()}", 500, ellipsis="...")
    return None


def _error_detail(tail: Sequence[str], python: str) -> str:
    error = last_error_line(tail)
    return f": {error}{module_hint(error, python)}" if error else ""


def module_hint(error_line: str, python: str) -> str:
    """For a module the agent could not import: the likely fix. lk-eval runs the agent
    with its own interpreter unless ``--python`` names the agent's (its venv's)."""
    if not error_line.startswith(_MODULE_NOT_FOUND):
        return ""
    return (
        f" (the agent ran with {python}: if that module is installed in the "
        "agent's own environment, pass its interpreter with --python, e.g. "
        "--python .venv/bin/python)"
    )


def last_error_line(tail: Sequence[str]) -> str:
    """The log's last exception line (or lk-eval's own line), masked, then cut."""
    for line in reversed(tail):
        text = line.strip()
        if _EXCEPTION_LINE.match(text) or text.startswith("lk-eval:"):
            # masked before the cut: a secret cut in half is no longer recognised
            return clip(text, 300, ellipsis="")
    return ""


__all__ = [
    "BOOT_FAILURE",
    "CRASH_MARKERS",
    "MOCK_TOOLS_REASON",
    "crash_reason",
    "exit_reason",
    "last_error_line",
    "log_crashed",
    "mock_tools_refused",
    "module_hint",
]
