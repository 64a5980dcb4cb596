"""``lkeval validate``: check scenario files without running anything."""

from __future__ import annotations

import argparse
import sys

from lkeval.errors import ExitCode
from lkeval.scenarios.loader import load_scenario_files, summarize
from lkeval.text.untrusted import inert_line, inert_lines


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``validate`` on the subcommand parsers."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "validate",
        help="check scenario files and print what they hold",
        description="Check scenarios.yaml files (LiveKit's format plus lk-eval's scripted "
        "turns) and print what they hold. Exit 2 when a file has errors.",
    )
    parser.add_argument("files", nargs="+", metavar="SCENARIOS.yaml")
    parser.set_defaults(handler=lambda args: validate_main(args.files))


def validate_main(files: list[str]) -> ExitCode:
    """Print every diagnostic (errors and warnings) and the summary; 2 on any error."""
    groups, diagnostics = load_scenario_files(files)
    for diagnostic in diagnostics:
        print(inert_line(str(diagnostic)), file=sys.stderr)  # quotes the scenario file
    print(inert_lines(summarize(groups, diagnostics)))  # names groups and labels
    return ExitCode.USAGE if any(d.is_error for d in diagnostics) else ExitCode.PASSED
