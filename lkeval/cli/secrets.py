"""The run's secrets, known before anything is printed.

The process's :func:`~lkeval.text.masking.process_masker` reads the environment by itself;
what only the command line knows is registered here: ``--env`` values whose names look secret,
the values of ``--secret-env NAME`` (a secret under any name), and ``--github-token``. In
GitHub Actions the runner is told too (``::add-mask::``), first, so even a line printed by
something other than lk-eval's writers (a library's warning) is hidden in the log.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import TextIO

from lkeval.text.commands import add_mask_commands
from lkeval.text.masking import process_masker, register_environ, register_secret


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


def register_run_secrets(
    env: Mapping[str, str],
    secret_env: Sequence[str],
    github_token: str | None,
    github: bool,
    stream: TextIO,
) -> None:
    """Register the command line's secrets; in Actions, print ``::add-mask::`` for all."""
    register_environ(env, secret_env)
    register_secret(github_token)
    if github:
        stream.write("".join(line + "\n" for line in add_mask_commands(process_masker())))
        stream.flush()
