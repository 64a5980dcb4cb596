"""``lkeval validate``: check scenario files without running anything, and say what the
sequential test's settings (``--catch``, ``--max-attempts``) catch and cost before a run."""

from __future__ import annotations

import argparse
import sys

from lkeval.cli import options as opt
from lkeval.errors import ExitCode
from lkeval.results.sampling import SequentialRule
from lkeval.results.sensitivity import plan_lines
from lkeval.scenarios.loader import load_scenario_files, summarize
from lkeval.text.untrusted import inert_line, inert_lines


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``validate`` on the subcommand parsers."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "validate",
        help="check scenario files and print what they hold",
        description="Check scenarios.yaml files (LiveKit's format plus lk-eval's scripted "
        "turns) and print what they hold, and what the sequential test at --catch and "
        "--max-attempts catches and costs (exact). Exit 2 when a file has errors.",
    )
    parser.add_argument("files", nargs="+", metavar="SCENARIOS.yaml")
    parser.add_argument(
        "--catch",
        type=opt.parse_catch,
        metavar="BROKEN:CHANCE",
        help="the sensitivity to plan (as `lkeval run --catch`; default 90%%:99%%)",
    )
    parser.add_argument(
        "--max-attempts",
        type=opt.positive_int_up_to(1000),
        default=SequentialRule.max_attempts,
        metavar="N",
        help="the cap to plan (as `lkeval run --max-attempts`; default %(default)s)",
    )
    parser.set_defaults(
        handler=lambda args: validate_main(
            args.files, opt.sensitivity_rule(args.catch, args.max_attempts)
        )
    )


def validate_main(files: list[str], rule: SequentialRule | None = None) -> ExitCode:
    """Print every diagnostic (errors and warnings), the summary and the sequential test's
    plan at ``rule``; 2 on any error."""
    groups, diagnostics = load_scenario_files(files)
    for diagnostic in diagnostics:
        print(inert_line(str(diagnostic)), file=sys.stderr)  # quotes the scenario file
    print(inert_lines(summarize(groups, diagnostics)))  # names groups and labels
    if any(d.is_error for d in diagnostics):
        return ExitCode.USAGE
    scenarios = sum(len(group.scenarios) for group in groups)
    print("\n".join(plan_lines(rule or SequentialRule(), max(1, scenarios))))
    return ExitCode.PASSED
