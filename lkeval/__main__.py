"""``python -m lkeval`` and the ``lkeval`` command: the command line, leaving fast."""

from __future__ import annotations

from lkeval.startup import paused_collections


def main() -> None:
    """Import the command line with the garbage collector paused, run it, and leave without
    the interpreter's teardown (:func:`lkeval.cli.entrypoint`)."""
    with paused_collections():
        from lkeval.cli import entrypoint  # the bulk of lk-eval's own start-up
    entrypoint()


if __name__ == "__main__":
    main()
