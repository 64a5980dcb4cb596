"""Where LiveKit's own log lines go when they are written inside the lk-eval process.

LiveKit's built-in judges and LLM clients run in this process and log through the
``livekit`` logger (``task_completion_judge: no instructions found ...``, "failed to generate
LLM completion, retrying"). lk-eval configures no logging, so Python's last-resort handler
would print every warning into the terminal's progress display. They belong beside the agent
logs instead: a file, masked like every other file lk-eval writes, created only when
something is logged.
"""

from __future__ import annotations

import logging
from pathlib import Path

from lkeval.text.masking import mask

__all__ = ["route_livekit_logs"]

_HANDLER_NAME = "lkeval-livekit-logs"


class _MaskingFileHandler(logging.FileHandler):
    """A file handler that creates its folder on the first record and masks every line."""

    def _open(self):  # type: ignore[no-untyped-def]  # logging's own signature
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()

    def format(self, record: logging.LogRecord) -> str:
        """The usual line, with every known secret masked."""
        return mask(super().format(record))


def route_livekit_logs(path: Path | None) -> None:
    """Send the ``livekit`` logger's records to ``path`` (or nowhere), not to the terminal.

    Idempotent: a second call replaces the first handler (tests run lk-eval many times).
    """
    logger = logging.getLogger("livekit")
    for old in [h for h in logger.handlers if h.get_name() == _HANDLER_NAME]:
        logger.removeHandler(old)
        old.close()
    handler: logging.Handler
    if path is None:
        handler = logging.NullHandler()
    else:
        handler = _MaskingFileHandler(path, encoding="utf-8", delay=True)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.set_name(_HANDLER_NAME)
    logger.addHandler(handler)
    logger.propagate = False
