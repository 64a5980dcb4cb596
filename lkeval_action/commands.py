"""Workflow commands (``::error::``, ``::group::``) and the entrypoint's own log lines."""

from __future__ import annotations


def escape(message: str) -> str:
    """Escape a workflow command's message (``%``, CR, LF), as the runner expects."""
    return message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def workflow_command(name: str, message: str) -> str:
    """``::name::message``: ``::error::...`` shows as an annotation, ``::group::`` folds."""
    return f"::{name}::{escape(message)}"


def log(line: str) -> None:
    """One line to stdout, flushed before any child writes its own."""
    print(line, flush=True)
