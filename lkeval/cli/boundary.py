"""The one error boundary: exceptions become one line, a tip and a documented exit code.

Modelled on pre-commit's ``error_handler``: a user's mistake (:class:`lkeval.errors.LkevalError`
or an ``OSError`` naming a file) is one line saying what and where, with the code its class
carries; Ctrl-C is 130; anything else is an internal error that says it is a bug, so nobody
mistakes it for a verdict on their agent. Messages are masked: an exception can quote a URL or
a header with a key in it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TextIO

from lkeval.errors import ExitCode, LkevalError
from lkeval.publish.github.action_inputs import for_action
from lkeval.text.commands import inert_lines
from lkeval.text.masking import mask

BUG_TIP = "this is a bug in lk-eval; please report it with the command you ran"


def classify(exc: BaseException) -> tuple[ExitCode, str, str | None]:
    """(exit code, message, tip) for an exception that reached the top."""
    if isinstance(exc, LkevalError):
        return exc.exit_code, str(exc), exc.tip
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED, "interrupted", None
    if isinstance(exc, OSError) and exc.filename:
        return ExitCode.USAGE, f"{exc.filename}: {exc.strerror or exc}", None
    one_line = " ".join(str(exc).split())
    return ExitCode.INTERNAL, f"internal error: {type(exc).__name__}: {one_line}", BUG_TIP


def report_error(exc: BaseException, stream: TextIO | None = None) -> ExitCode:
    """Print ``lk-eval: message`` (and the tip) for ``exc``; return its exit code."""
    out = stream if stream is not None else sys.stderr
    code, message, tip = classify(exc)
    # may quote a scenario file or a results file: never a workflow command, never a secret
    out.write(inert_lines(for_action(mask(f"lk-eval: {message}"))) + "\n")
    if tip:
        out.write(f"  tip: {tip}\n")
    out.flush()
    return code


def guarded(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a subcommand's handler inside the boundary."""
    try:
        return int(handler(args))
    except (Exception, KeyboardInterrupt) as exc:
        return int(report_error(exc))
