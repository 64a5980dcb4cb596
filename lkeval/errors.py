"""The exit codes of ``lkeval`` and the exceptions that carry them.

A branch-protection rule and a workflow read only the exit code, so its meaning is written once,
here, and every layer raises a subclass of :class:`LkevalError` that carries its code. The CLI's
one error boundary (:func:`lkeval.cli.main`) turns any of them into one line on stderr (plus a
tip) and that code; anything else is a bug and says so.

This module is the floor of the package: it imports nothing from lkeval, so any layer may raise
these (see ``tests/project/test_architecture.py``).
"""

from __future__ import annotations

import enum
import signal
from typing import ClassVar


class ExitCode(enum.IntEnum):
    """What ``lkeval`` exits with (documented in ``--help`` and the README)."""

    PASSED = 0
    """The gate passed (``merge``/``validate``: all went well)."""
    GATE_FAILED = 1
    """Scenarios failed, regressed, or the pass rate is too low."""
    USAGE = 2
    """Bad flags, a bad scenario/results/baseline file, bad configuration, an unwritable output."""
    NOTHING_RAN = 3
    """Nothing could run (the agent never booted, a dependency is down): a broken setup."""
    INTERNAL = 4
    """An unexpected exception: a bug in lk-eval."""
    INTERRUPTED = 128 + signal.SIGINT
    """Stopped by SIGINT (Ctrl-C): 130."""
    TERMINATED = 128 + signal.SIGTERM
    """Stopped by SIGTERM (a cancelled CI job): 143."""

    @classmethod
    def for_signal(cls, sig: int) -> ExitCode:
        """The shell's convention, 128 + the signal number (only SIGINT/SIGTERM are caught)."""
        return cls.TERMINATED if sig == signal.SIGTERM else cls.INTERRUPTED


class LkevalError(Exception):
    """An error a user can cause and fix; its message is one line naming file/line/field/flag.

    ``exit_code`` is the class's; ``tip`` an optional second line saying what to do.
    """

    exit_code: ClassVar[ExitCode] = ExitCode.USAGE
    tip: ClassVar[str | None] = None


class UsageError(LkevalError):
    """Bad flags or flag values; the message names the flag."""


class InputFileError(LkevalError):
    """A file lk-eval reads (scenarios, results, baseline) is missing or malformed."""


class ConfigError(LkevalError):
    """The environment or configuration cannot work (an LLM without credentials, a bad URL)."""


class NothingToRunError(LkevalError):
    """The run holds no scenario to play (an empty file, a selection that leaves nothing):
    exit 3 before anything boots, never a gate that passes on nothing."""

    exit_code = ExitCode.NOTHING_RAN


class OutputError(LkevalError):
    """A report or results file cannot be written; names the target path, never a temp file."""

    tip = "check that the directory exists, is writable and has free space"

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: cannot write: {why}")
        self.path = path


def is_internal(exc: BaseException) -> bool:
    """Whether ``exc`` reaching the top is a bug in lk-eval (exit 4), not a user's mistake (an
    :class:`LkevalError`, an ``OSError`` naming a file) or an interrupt."""
    if isinstance(exc, (LkevalError, KeyboardInterrupt)):
        return False
    return not (isinstance(exc, OSError) and exc.filename)


__all__ = [
    "ConfigError",
    "ExitCode",
    "InputFileError",
    "LkevalError",
    "NothingToRunError",
    "OutputError",
    "UsageError",
    "is_internal",
]
