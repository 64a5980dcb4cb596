"""The command line's secrets, known (and in Actions announced) before anything is printed.

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
import os
from collections.abc import Sequence
from typing import TextIO

from lkeval.text.commands import add_mask_commands
from lkeval.text.masking import register_argv


def add_secret_arguments(parser: argparse.ArgumentParser) -> None:
    """``--secret-env NAME`` (repeatable)."""
    parser.add_argument(
        "--secret-env",
        action="append",
        default=[],
        metavar="NAME",
        help="mask the value of this variable (from --env or the environment) everywhere, "
        "whatever its name (names with KEY, TOKEN, SECRET, PASSWORD are masked anyway)",
    )


def announce_secrets(argv: Sequence[str], stream: TextIO) -> None:
    """Register the command line's secrets; in Actions (``GITHUB_ACTIONS=true`` or
    ``--github``), print ``::add-mask::`` for every secret the process knows."""
    register_argv(argv)
    github = os.environ.get("GITHUB_ACTIONS") == "true" or "--github" in argv
    if github:
        stream.write("".join(line + "\n" for line in add_mask_commands()))
        stream.flush()
