"""Keep secrets out of everything lk-eval writes or posts.

Transcripts are the agent's own words and log tails are its stdout: either can echo an API key
the agent was given (a tool that prints its config, a traceback with a URL). Reports end up in
PR comments that anyone who can read the repository sees, so every reporter output, every
GitHub request body and the progress log pass through one :class:`Masker`.

Masking is done twice on purpose: :meth:`Masker.mask_results` cleans the result model before
any reporter sees it (so an escaped form in XML or JSON cannot slip past), and
:meth:`Masker.mask` cleans the final text (so a reporter that builds text from elsewhere is
still covered).
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

#: Environment variables whose name contains one of these (case-insensitive) hold secrets.
SECRET_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
#: Shorter values are ignored: masking "1" or "true" everywhere would wreck every report.
MIN_SECRET_LENGTH = 6
MASK = "***"
#: Command-line flags whose value is a secret (kept out of the argv a results file records).
SECRET_FLAGS = ("--github-token",)

T = TypeVar("T")


class Masker:
    """Collects secret values and replaces them with ``***`` in any text."""

    def __init__(self, values: Iterable[str | None] = ()) -> None:
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        for value in values:
            self.add(value)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Masker:
        """A masker that knows every secret-looking variable of ``environ`` (default: os)."""
        env = os.environ if environ is None else environ
        masker = cls()
        for name, value in env.items():
            if is_secret_name(name):
                masker.add(value)
        return masker

    def add(self, value: str | None) -> None:
        """Add one secret (ignored when empty or shorter than :data:`MIN_SECRET_LENGTH`)."""
        if not value:
            return
        # A multi-line secret (a PEM key) leaks line by line as easily as whole.
        for part in {value, *value.splitlines()}:
            part = part.strip()
            if len(part) >= MIN_SECRET_LENGTH and part not in self._values:
                self._values.add(part)
                self._pattern = None

    @property
    def secrets(self) -> tuple[str, ...]:
        """The known secrets, longest first (stable order for ``::add-mask::``)."""
        return tuple(sorted(self._values, key=lambda v: (-len(v), v)))

    def mask(self, text: str) -> str:
        """``text`` with every known secret, also in escaped forms, replaced by ``***``."""
        if not self._values or not text:
            return text
        pattern = self._compiled()
        return pattern.sub(MASK, text) if pattern is not None else text

    def mask_results(self, value: T) -> T:
        """A copy of a frozen result model (or any nest of them) with every string masked."""
        if not self._values:
            return value
        masked: T = self._mask_any(value)
        return masked

    def _mask_any(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.mask(value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            changes = {
                f.name: self._mask_any(getattr(value, f.name))
                for f in dataclasses.fields(value)
                if f.init
            }
            return dataclasses.replace(value, **changes)
        if isinstance(value, tuple):
            return tuple(self._mask_any(v) for v in value)
        if isinstance(value, list):
            return [self._mask_any(v) for v in value]
        if isinstance(value, dict):
            return {self._mask_any(k): self._mask_any(v) for k, v in value.items()}
        return value

    def _compiled(self) -> re.Pattern[str] | None:
        if self._pattern is None:
            variants: set[str] = set()
            for secret in self._values:
                variants.update(_escaped_forms(secret))
            variants = {v for v in variants if len(v) >= MIN_SECRET_LENGTH}
            if not variants:
                return None
            ordered = sorted(variants, key=lambda v: (-len(v), v))
            self._pattern = re.compile("|".join(re.escape(v) for v in ordered))
        return self._pattern


def is_secret_name(name: str) -> bool:
    """Whether an environment variable of this name is treated as a secret."""
    upper = name.upper()
    return any(part in upper for part in SECRET_NAME_PARTS)


def redact_argv(argv: Iterable[str]) -> tuple[str, ...]:
    """``argv`` with the values of :data:`SECRET_FLAGS` replaced by ``***``.

    A results file records its command line and is kept as an artifact; a token given as
    ``--github-token X`` must not travel with it.
    """
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(MASK)
            hide_next = False
        elif arg in SECRET_FLAGS:
            out.append(arg)
            hide_next = True
        elif arg.startswith(tuple(f"{flag}=" for flag in SECRET_FLAGS)):
            out.append(arg.split("=", 1)[0] + "=" + MASK)
        else:
            out.append(arg)
    return tuple(out)


def _escaped_forms(secret: str) -> set[str]:
    """The forms a secret takes once a reporter escaped it (XML/HTML, JSON, workflow data)."""
    return {
        secret,
        html.escape(secret, quote=False),
        html.escape(secret, quote=True),
        json.dumps(secret, ensure_ascii=False)[1:-1],
        json.dumps(secret)[1:-1],
        secret.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"),
        secret.replace("|", "\\|"),
    }
