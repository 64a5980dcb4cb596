"""``python -m lkeval``: the same as the ``lkeval`` command."""

from lkeval.cli import entrypoint

entrypoint()
