"""``python -m lkeval`` and the ``lkeval`` command: the command line, leaving fast.

``lkeval run`` holds SIGINT/SIGTERM for the run from this module's first lines, before any of
lk-eval is imported (:data:`lkeval.startup.HELD`), then starts its fork server
(:mod:`lkeval.run.early_start`): it preloads the framework while lk-eval imports its own
command line and checks the run.
"""

from __future__ import annotations

import sys

from lkeval.startup import HELD, paused_collections

if sys.argv[1:2] == ["run"]:  # from here on a signal is the run's: it writes what it has
    HELD.hold()

from lkeval.run.early_start import EARLY  # after the signals are held


def main() -> None:
    """Start the run's fork server, import the command line with the garbage collector
    paused, run it, and leave without the interpreter's teardown
    (:func:`lkeval.cli.leave`). A fork server the run did not take is gone before then."""
    argv = sys.argv[1:]
    code = 130
    try:
        EARLY.begin(argv)
        with paused_collections():
            from lkeval.cli import leave  # the bulk of lk-eval's start-up
            from lkeval.cli import main as cli_main
        code = cli_main(argv)
    except KeyboardInterrupt:  # a second Ctrl-C while lk-eval was still importing
        print("lk-eval: interrupted", file=sys.stderr)
        sys.exit(code)
    finally:
        EARLY.end()
    leave(code)


if __name__ == "__main__":
    main()
