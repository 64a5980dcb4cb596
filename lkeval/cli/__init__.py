"""The ``lkeval`` command line: parsing, subcommands, and the one error boundary.

Every error a user can cause ends here as one line on stderr and a documented exit code, never
a traceback:

    0  the gate passed            2  bad usage, bad scenario/results file, bad configuration
    1  the gate failed            3  nothing could run (e.g. the agent never booted)
    4  an internal error (a bug)  130 / 143  interrupted by SIGINT / SIGTERM
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from lkeval import __version__

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_USAGE = 2
EXIT_NOTHING_RAN = 3
EXIT_INTERNAL = 4


class UsageError(Exception):
    """Bad flags or configuration; the message says which."""


class _Parser(argparse.ArgumentParser):
    """In the Action, a usage error names the input the user set, not the option it became."""

    def error(self, message: str) -> NoReturn:
        from lkeval.publish.github.action_inputs import for_action, input_names

        if not input_names():
            super().error(message)
        self.exit(EXIT_USAGE, for_action(f"lk-eval: {self.prog}: {message}") + "\n")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line (subcommands register their own flags)."""
    from lkeval.cli import merge as merge_command, run as run_command, validate as validate_command
    from lkeval.publish.outputs import add_report_command

    parser: argparse.ArgumentParser = _Parser(
        prog="lkeval",
        description="Scenario evals for LiveKit agents: replay scenarios.yaml against your "
        "agent over the console protocol, judge, report, and gate merges.",
        epilog="Exit codes: 0 gate passed, 1 gate failed, 2 bad usage or input, 3 nothing "
        "could run, 4 internal error, 130/143 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"lk-eval {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    run_command.add_run_command(sub)
    validate_command.add_validate_command(sub)
    add_report_command(sub)
    merge_command.add_merge_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``lkeval``; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        print("lk-eval: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the boundary: known errors get one line, others a bug report
        from lkeval.publish.github.action_inputs import for_action
        from lkeval.publish.github.workflow import inert_lines

        code, message = classify(exc)
        # may quote a scenario file or a results file: never a workflow command, never a secret
        print(inert_lines(for_action(f"lk-eval: {message}")), file=sys.stderr)
        if code == EXIT_INTERNAL:
            print(
                "  this is a bug in lk-eval; please report it with the command you ran",
                file=sys.stderr,
            )
        return code


def classify(exc: Exception) -> tuple[int, str]:
    """Map an exception to (exit code, one-line message)."""
    from lkeval.llm.config import LLMConfigError
    from lkeval.results.model import ResultsFileError
    from lkeval.scenarios.loader import ScenarioFileError

    if isinstance(exc, ScenarioFileError):
        return EXIT_USAGE, str(exc)
    if isinstance(exc, (UsageError, LLMConfigError, ResultsFileError)):
        return EXIT_USAGE, str(exc)
    if isinstance(exc, OSError) and exc.filename:
        return EXIT_USAGE, f"{exc.filename}: {exc.strerror}"
    return EXIT_INTERNAL, f"internal error: {type(exc).__name__}: {exc}"


def entrypoint() -> None:
    """Console-script entry."""
    sys.exit(main())


if __name__ == "__main__":
    entrypoint()
