"""The ``lkeval`` command line: the parser, the command registry and the one error boundary.

Every error a user can cause ends in :func:`main` as one line on stderr (plus a tip) and a
documented exit code (:class:`lkeval.errors.ExitCode`), never a traceback; anything unexpected
says it is a bug. The subcommands (:data:`COMMANDS`) only raise: none has a boundary of its own.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from lkeval import __version__
from lkeval.cli import merge as merge_command
from lkeval.cli import report as report_command
from lkeval.cli import run as run_command
from lkeval.cli import validate as validate_command
from lkeval.cli.boundary import guarded
from lkeval.cli.secrets import announce_secrets
from lkeval.errors import ExitCode
from lkeval.text.masking import mask

#: The subcommands, in ``--help`` order: each adds its parser and sets its ``handler``.
COMMANDS: tuple[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None], ...] = (
    run_command.add_command,
    validate_command.add_command,
    report_command.add_command,
    merge_command.add_command,
)


class _Parser(argparse.ArgumentParser):
    """In the Action, a usage error names the input the user set, not the option it became.

    No abbreviations (``--github-tok``): the secrets a command line carries are found by
    their flags' exact names before it is parsed (:mod:`lkeval.cli.secrets`), here and in
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``lkeval``; returns the process exit code (argparse itself exits 2 on bad flags)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    announce_secrets(argv, sys.stdout)  # before argparse or anything else prints a line
    args = build_parser().parse_args(argv)
    return int(guarded(args.handler, args))


def entrypoint() -> None:
    """Console-script entry."""
    sys.exit(main())


__all__ = ["COMMANDS", "ExitCode", "build_parser", "entrypoint", "main"]

if __name__ == "__main__":
    entrypoint()
