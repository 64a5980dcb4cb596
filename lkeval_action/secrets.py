"""The entrypoint's part of masking: lkeval's own masker, told to the runner before any line.

The entrypoint runs before lkeval: it may print an input error, runs the user's install
command and echoes lkeval's command line. So it registers the secrets lkeval itself will
(:mod:`lkeval.text.masking`, the same code: the environment's secret-looking variables, URL
passwords wherever they sit, ``--env`` pairs, ``--secret-env``, ``--github-token``) and prints
``::add-mask::`` for each before anything else, so the runner hides them in every later line,
the install's output included. There is no second set of rules here to drift from lkeval's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lkeval.text.masking import register_argv, register_environ
from lkeval.text.untrusted import add_mask_commands

#: The input lkeval's extra options come in (read raw when the inputs do not make a plan).
EXTRA_ARGS_VARIABLE = "INPUT_EXTRA-ARGS"


class Announcer:
    """Registers secrets into the process's masker and prints each one's ``::add-mask::``
    once, on stdout, before the caller prints anything that could carry it."""

    def __init__(self) -> None:
        self._announced: set[str] = set()

    def announce(self, environ: Mapping[str, str], argv: Sequence[str] = ()) -> None:
        """Register ``environ``'s secrets and ``argv``'s (lkeval's command line; without a
        plan, the raw ``extra-args`` split on whitespace), and announce the new ones."""
        register_environ(environ)
        register_argv(argv or environ.get(EXTRA_ARGS_VARIABLE, "").split(), environ)
        for line in add_mask_commands():
            if line not in self._announced:
                self._announced.add(line)
                print(line, flush=True)  # consumed by the runner; never masked itself
