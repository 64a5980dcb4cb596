"""The ``lkeval`` command line: the parser, the command registry, the command line's secrets
and the one error boundary.

Every error a user can cause ends in :func:`main` as one line on stderr (plus a tip) and a
documented exit code (:class:`lkeval.errors.ExitCode`), never a traceback; anything unexpected
says it is a bug. The subcommands (:data:`COMMANDS`) only raise: none has a boundary of its own.
Modelled on pre-commit's ``error_handler``: a user's mistake (:class:`lkeval.errors.LkevalError`
or an ``OSError`` naming a file) is one line saying what and where, with the code its class
carries; Ctrl-C is 130; anything else is an internal error that says it is a bug, so nobody
mistakes it for a verdict on their agent. Messages are masked: an exception can quote a URL or
a header with a key in it.

The command line's secrets are known (and in Actions announced) before anything is printed.
The process's one masker (:func:`~lkeval.text.masking.process_masker`) reads the environment
itself; what only the command line knows is registered from the raw argv, before argparse
has a chance to print a usage error that quotes it: ``--env`` values whose names look secret,
the values of ``--secret-env NAME`` (a secret under any name), ``--github-token`` and URL
passwords. In GitHub Actions the runner is told too (``::add-mask::``), first, so even a line
printed by something other than lk-eval's writers (a library's warning) is hidden in the log.
The Action's entrypoint does the same with the same functions before it echoes the command.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from lkeval import __version__
from lkeval.cli import calibrate as calibrate_command
from lkeval.cli import dev as dev_command
from lkeval.cli import merge as merge_command
from lkeval.cli import pin as pin_command
from lkeval.cli import report as report_command
from lkeval.cli import run as run_command
from lkeval.cli import validate as validate_command
from lkeval.cli.settings_file import Settings, load_settings, with_settings
from lkeval.errors import ExitCode, LkevalError, is_internal
from lkeval.publish.github.action_inputs import for_action
from lkeval.text.masking import mask, register_argv
from lkeval.text.untrusted import add_mask_commands, inert_lines, one_line

#: The subcommands, in ``--help`` order: each adds its parser and sets its ``handler``.
COMMANDS: tuple[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None], ...] = (
    run_command.add_command,
    dev_command.add_command,
    validate_command.add_command,
    report_command.add_command,
    merge_command.add_command,
    calibrate_command.add_command,
    pin_command.add_command,
)


class _Parser(argparse.ArgumentParser):
    """In the Action, a usage error names the input the user set, not the option it became.

    No abbreviations (``--github-tok``): the secrets a command line carries are found by
    their flags' exact names before it is parsed (:func:`announce_secrets`), here and in
    the Action's entrypoint.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        from lkeval.publish.github.action_inputs import for_action, input_names

        message = mask(message)  # argparse quotes the value it refused
        if not input_names():
            super().error(message)
        self.exit(ExitCode.USAGE, for_action(f"lk-eval: {self.prog}: {message}") + "\n")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line (each subcommand registers its own flags)."""
    parser: argparse.ArgumentParser = _Parser(
        prog="lkeval",
        description="Scenario evals for LiveKit agents: replay scenarios.yaml against your "
        "agent over the console protocol, judge, report, and gate merges.",
        epilog="Exit codes: 0 gate passed, 1 gate failed, 2 bad usage or input, 3 nothing "
        "could run, 4 internal error, 130/143 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"lk-eval {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in COMMANDS:
        add(sub)
    for command in sub.choices.values():
        add_debug_flag(command)
    return parser


def announce_secrets(argv: Sequence[str], stream: TextIO) -> None:
    """Register the command line's secrets; in Actions (``GITHUB_ACTIONS=true`` or
    ``--github``), print ``::add-mask::`` for every secret the process knows."""
    register_argv(argv)
    github = os.environ.get("GITHUB_ACTIONS") == "true" or "--github" in argv
    if github:
        stream.write("".join(line + "\n" for line in add_mask_commands()))
        stream.flush()


BUG_TIP = "this is a bug in lk-eval; please report it with the command you ran"


def classify(exc: BaseException) -> tuple[ExitCode, str, str | None]:
    """(exit code, message, tip) for an exception that reached the top."""
    if isinstance(exc, LkevalError):
        return exc.exit_code, str(exc), exc.tip
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED, "interrupted", None
    if not is_internal(exc):  # an OSError naming a file: that file is the user's to fix
        assert isinstance(exc, OSError)
        return ExitCode.USAGE, f"{exc.filename}: {exc.strerror or exc}", None
    one_line = " ".join(str(exc).split())
    return ExitCode.INTERNAL, f"internal error: {type(exc).__name__}: {one_line}", BUG_TIP


def report_error(exc: BaseException, stream: TextIO | None = None, debug: bool = False) -> ExitCode:
    """Print ``lk-eval: message`` (and the tip) for ``exc``; return its exit code. With
    ``debug`` (``--debug``, ``LKEVAL_DEBUG=1``) the traceback goes first, masked and inert."""
    out = stream if stream is not None else sys.stderr
    code, message, tip = classify(exc)
    if debug and not isinstance(exc, KeyboardInterrupt):
        trace = "".join(traceback.format_exception(exc)).rstrip("\n")
        out.write(inert_lines(mask(trace)) + "\n")
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
        return int(report_error(exc, debug=debugging(args)))


DEBUG_ENV = "LKEVAL_DEBUG"


def debugging(args: argparse.Namespace | None = None) -> bool:
    """``--debug`` or ``LKEVAL_DEBUG`` set (not ``0``): an error shows its traceback."""
    flag = bool(getattr(args, "debug", False))
    return flag or os.environ.get(DEBUG_ENV, "0").strip() not in ("", "0", "false")


def add_debug_flag(parser: argparse.ArgumentParser) -> None:
    """``--debug`` on a subcommand (``lkeval run ... --debug``)."""
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help=f"print the traceback of an error (also {DEBUG_ENV}=1)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``lkeval``; returns the process exit code (argparse itself exits 2 on bad flags)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        settings = run_settings(parser, argv)
    except LkevalError as exc:
        announce_secrets(argv, sys.stdout)
        return int(report_error(exc))
    argv = with_settings(argv, settings)
    announce_secrets(argv, sys.stdout)  # before argparse or anything else prints a line
    if settings is not None:
        sys.stderr.write(one_line(mask(settings.describe())) + "\n")  # a path: one line
    args = parser.parse_args(argv)
    return int(guarded(args.handler, args))


def run_settings(parser: argparse.ArgumentParser, argv: Sequence[str]) -> Settings | None:
    """``[tool.lkeval]`` (or lkeval.toml) for ``lkeval run``, and its keys ``lkeval dev``
    takes; None for the other commands, or when ``--no-settings`` is given or the project has
    none."""
    command = next((word for word in argv if not word.startswith("-")), None)
    if command not in ("run", "dev") or "--no-settings" in argv:
        return None
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if command == "dev":
        takes = {f.lstrip("-") for a in sub.choices["dev"]._actions for f in a.option_strings}
        return load_settings(sub.choices["run"], Path.cwd(), takes.__contains__)
    return load_settings(sub.choices["run"], Path.cwd())


def entrypoint() -> None:
    """Console-script entry: run, then leave without the interpreter's teardown."""
    leave(main())


def leave(code: int) -> NoReturn:
    """Exit with ``code`` once every output is flushed, skipping the interpreter's teardown.

    By the time :func:`main` returns, every file lk-eval writes (results, reports, logs) is
    written and closed, and every agent and the fork server are stopped. What is left is the
    interpreter's clean-up of the LiveKit stack imported for the judge and caller (~0.7 s of
    garbage collection and module teardown between the gate line and the exit, on 2 cores):
    its ``atexit`` hooks only close resource-file contexts (certifi's CA bundle, livekit's
    bundled files, none of them temporary copies) and logging, which is shut down (flushed)
    here. The agent processes leave the same way (``tree.fast_exit``). A thread that is
    not a daemon would be waited for by a normal exit; none is expected, but if one is alive
    the normal exit runs so that whatever it writes is not lost.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe: nothing more to say anyway
            stream.flush()
    if any(t.is_alive() and not t.daemon for t in _other_threads()):
        sys.exit(code)
    os._exit(code)


def _other_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t is not threading.main_thread()]


__all__ = [
    "BUG_TIP",
    "COMMANDS",
    "ExitCode",
    "announce_secrets",
    "build_parser",
    "debugging",
    "entrypoint",
    "leave",
    "main",
    "report_error",
]

if __name__ == "__main__":
    entrypoint()
