"""Secrets masked in the log lines pytest shows and writes while scenarios play.

``lkeval run`` masks an agent's log before anyone reads it; under pytest the agent runs in
pytest's process, and its log records (and livekit's) reach pytest's own handlers: the
"Captured log" section of a failed test, ``log_cli``, ``log_file``. A filter on those handlers
masks each record's message with the process's one masker first.
"""

from __future__ import annotations

import logging

import pytest

from lkeval.text.masking import mask

HANDLERS = ("caplog_handler", "report_handler", "log_file_handler", "log_cli_handler")


class MaskingFilter(logging.Filter):
    """Rewrites a record whose message holds a secret; never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Mask the formatted message (its arguments are folded in once masked)."""
        try:
            text = record.getMessage()
        except Exception:  # a record whose arguments do not format: the handler says so
            return True
        masked = mask(text)
        if masked != text:
            record.msg, record.args = masked, None
        return True


def mask_pytest_logs(config: pytest.Config) -> None:
    """Put the masking filter on pytest's log handlers (its logging plugin's)."""
    plugin = config.pluginmanager.get_plugin("logging-plugin")
    if plugin is None:
        return
    for name in HANDLERS:
        handler = getattr(plugin, name, None)
        if isinstance(handler, logging.Handler):
            handler.addFilter(MaskingFilter())
