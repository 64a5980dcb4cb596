"""Workflow commands (``::error::``, ``::group::``) and the entrypoint's own log lines.

Both are lkeval's (:mod:`lkeval.text`): a command's message and properties are escaped as the
runner expects and never carry a live ``##[``; every line is masked with the process's one
masker, whose secrets :mod:`lkeval_action.secrets` announced first.
"""

from __future__ import annotations

from lkeval.text.masking import mask
from lkeval.text.untrusted import command


def workflow_command(name: str, message: str) -> str:
    """``::name::message``: ``::error::...`` shows as an annotation, ``::group::`` folds."""
    return command(name, message)


def log(line: str) -> None:
    """One line to stdout, masked, flushed before any child writes its own."""
    print(mask(line), flush=True)
