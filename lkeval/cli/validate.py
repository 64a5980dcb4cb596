"""``lkeval validate``: check scenario files without running anything."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lkeval.publish.github.workflow import inert_line, inert_lines
from lkeval.scenarios.loader import load_scenario_files, summarize


def add_validate_command(sub: Any) -> None:
    """Register ``validate`` on the subcommand parsers."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "validate",
        help="check scenario files and print what they hold",
        description="Check scenarios.yaml files (LiveKit's format plus lk-eval's scripted "
        "turns) and print what they hold. Exit 2 when a file has errors.",
    )
    parser.add_argument("files", nargs="+", metavar="SCENARIOS.yaml")
    parser.set_defaults(handler=validate_main)


def validate_main(args: argparse.Namespace) -> int:
    """Print every diagnostic (errors and warnings) and the summary; 2 on any error."""
    groups, diagnostics = load_scenario_files(args.files)
    for diagnostic in diagnostics:
        print(inert_line(str(diagnostic)), file=sys.stderr)  # quotes the scenario file
    print(inert_lines(summarize(groups, diagnostics)))  # names groups and labels
    return 2 if any(d.is_error for d in diagnostics) else 0
