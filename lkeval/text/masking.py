"""Keep secrets out of everything lk-eval writes or posts: the one masking boundary.

Transcripts are the agent's own words and its logs are its stdout: either can echo an API key
the agent was given (a tool that prints its config, a traceback with a URL). Reports end up in
PR comments that anyone who can read the repository sees, so every stream that leaves the
process (stdout/stderr lines, workflow commands, results.json, JUnit, Markdown, the PR comment
and summary, ``$GITHUB_OUTPUT``, the agent logs) passes through a :class:`Masker`.

Three rules make that hold:

* One masker per process (:func:`process_masker`), and no other: the environment's
  secret-looking variables, read once when it is first used, and what the command line
  carries (``--env`` values with such names, ``--secret-env NAME`` values, the GitHub token,
  URL passwords), registered by :func:`register_argv` before anything is printed. Every
  writer masks with it, so none can mask with a set that lacks a secret, or with none because
  a caller did not pass one along. (A masker built per run and handed down was the other way;
  it could not reach a library's log line or a ``clip`` deep inside the judge.)
* Mask *before* cutting. A secret cut in half is no longer recognised, so every truncation of
  text that may hold one goes through :func:`clip`, which masks first.
* Fragments count. Any run of :data:`MIN_FRAGMENT_LENGTH` or more characters of a secret is
  masked too, so a cut that happened somewhere out of reach (a library's message, an old
  results file) still does not leak most of a key.
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import unquote

#: Environment variables whose name contains one of these (case-insensitive) hold secrets.
SECRET_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
#: Secrets by name that the name rule would miss (none today: kept for the record and tests).
KNOWN_SECRET_NAMES = (
    "GITHUB_TOKEN",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "LIVEKIT_API_KEY",
    "LIVEKIT_API_SECRET",
    "OPENAI_API_KEY",
    "LKEVAL_CALLER_API_KEY",
    "LKEVAL_JUDGE_API_KEY",
)
#: Shorter values are ignored: masking "1" or "true" everywhere would wreck every report.
MIN_SECRET_LENGTH = 6
#: A run of this many characters of a secret is masked wherever it appears.
MIN_FRAGMENT_LENGTH = 12
MASK = "***"
#: Command-line flags whose value is a secret (kept out of the argv a results file records).
SECRET_FLAGS = ("--github-token",)
#: Flags whose ``NAME=VALUE`` argument is masked when NAME looks secret.
ENV_FLAGS = ("--env",)
#: Flags naming a variable whose value is a secret whatever its name.
SECRET_ENV_FLAGS = ("--secret-env",)

# Fragments are found by looking up windows of this many characters at every _STEP-th
# position: any run of MIN_FRAGMENT_LENGTH characters covers one such window whole.
_STEP = 4
_WINDOW = MIN_FRAGMENT_LENGTH - _STEP + 1

T = TypeVar("T")


class Masker:
    """Collects secret values and replaces them (and long fragments of them) with ``***``."""

    def __init__(self, values: Iterable[str | None] = ()) -> None:
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._windows: dict[str, list[tuple[str, int]]] | None = None
        for value in values:
            self.add(value)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Masker:
        """A masker that knows every secret-looking variable of ``environ`` (default: os)."""
        masker = cls()
        masker.add_environ(os.environ if environ is None else environ)
        return masker

    def add_environ(self, environ: Mapping[str, str]) -> None:
        """Add the secrets of an environment (or of ``--env`` pairs): by name, and URL
        passwords (``postgres://user:PASSWORD@host``) whatever the name."""
        for name, value in environ.items():
            if is_secret_name(name) and not _is_existing_path(value):
                self.add(value)
            else:
                for password in url_passwords(value):
                    self.add(password)

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
                self._windows = None

    @property
    def secrets(self) -> tuple[str, ...]:
        """The known secrets, longest first (stable order for ``::add-mask::``)."""
        return tuple(sorted(self._values, key=lambda v: (-len(v), v)))

    def mask(self, text: str) -> str:
        """``text`` with every known secret, in plain and escaped forms, and every run of
        :data:`MIN_FRAGMENT_LENGTH` characters of one, replaced by ``***``."""
        if not self._values or not text:
            return text
        pattern = self._compiled()
        if pattern is not None:
            text = pattern.sub(MASK, text)
        return self._mask_fragments(text)

    def clip(self, text: str, limit: int, ellipsis: str = "…") -> str:
        """``text`` masked, then cut to ``limit`` characters: the only safe order."""
        masked = self.mask(text)
        if len(masked) <= limit:
            return masked
        return masked[: max(0, limit - len(ellipsis))].rstrip() + ellipsis

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
            variants = {v for s in self._values for v in _escaped_forms(s)}
            variants = {v for v in variants if len(v) >= MIN_SECRET_LENGTH}
            if not variants:
                return None
            ordered = sorted(variants, key=lambda v: (-len(v), v))
            self._pattern = re.compile("|".join(re.escape(v) for v in ordered))
        return self._pattern

    def _fragment_index(self) -> dict[str, list[tuple[str, int]]]:
        """Every window of every (escaped form of a) long secret, with where it sits."""
        if self._windows is None:
            index: dict[str, list[tuple[str, int]]] = {}
            for secret in self._values:
                for form in _escaped_forms(secret):
                    for start in range(len(form) - _WINDOW + 1):
                        index.setdefault(form[start : start + _WINDOW], []).append((form, start))
            self._windows = index
        return self._windows

    def _mask_fragments(self, text: str) -> str:
        index = self._fragment_index()
        if not index or len(text) < MIN_FRAGMENT_LENGTH:
            return text
        spans: list[tuple[int, int]] = []
        covered = 0
        for at in range(0, len(text) - _WINDOW + 1, _STEP):
            if at + _WINDOW <= covered:
                continue
            hits = index.get(text[at : at + _WINDOW])
            if not hits:
                continue
            start, end = _longest_match(text, at, hits)
            if end - start >= MIN_FRAGMENT_LENGTH:
                spans.append((start, end))
                covered = max(covered, end)
        if not spans:
            return text
        out: list[str] = []
        last = 0
        for start, end in _merged(spans):
            out.append(text[last:start] + MASK)
            last = end
        out.append(text[last:])
        return "".join(out)


def _longest_match(text: str, at: int, hits: list[tuple[str, int]]) -> tuple[int, int]:
    """The widest span around ``text[at:]`` that is a substring of one of the ``hits``."""
    best = (at, at)
    for form, offset in hits:
        left = 0
        while (
            at - left > 0 and offset - left > 0 and text[at - left - 1] == form[offset - left - 1]
        ):
            left += 1
        right = _WINDOW
        while (
            at + right < len(text)
            and offset + right < len(form)
            and text[at + right] == form[offset + right]
        ):
            right += 1
        if right + left > best[1] - best[0]:
            best = (at - left, at + right)
    return best


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


_PROCESS: Masker | None = None


def process_masker() -> Masker:
    """The one masker of this process; every writer, reporter and log line masks with it.

    Built from the environment on first use (each command does that first thing, see
    :func:`register_argv`), then grown by :func:`register_secret` and :func:`register_argv`.
    lk-eval never changes its own environment afterwards (an agent gets its own), so the
    environment is read once, not on every call.
    """
    global _PROCESS
    if _PROCESS is None:
        _PROCESS = Masker.from_environ()
    return _PROCESS


def register_secret(*values: str | None) -> None:
    """Make values secrets for the rest of the process (too short ones are ignored)."""
    masker = process_masker()
    for value in values:
        masker.add(value)


def register_environ(environ: Mapping[str, str], names: Iterable[str] = ()) -> None:
    """Register the secrets of an environment or of ``--env`` pairs (by the name rule, URL
    passwords whatever the name) and the values of ``names`` (``--secret-env``), looked up in
    ``environ`` first, then in the process environment."""
    masker = process_masker()
    masker.add_environ(environ)
    for name in names:
        masker.add(environ.get(name) or os.environ.get(name))


def register_argv(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> None:
    """Register the secrets an lkeval command line carries, before it is parsed or printed:
    ``--env NAME=VALUE`` (by the name rule), ``--secret-env NAME`` (looked up in those pairs,
    then in ``environ``, default the process's), ``--github-token`` and the password of any
    URL in any argument.

    The Action's entrypoint calls this on the command line it is about to echo, and lkeval on
    its own argv, so both know the same secrets before either prints a line.
    """
    environ = os.environ if environ is None else environ
    pairs: dict[str, str] = {}
    for value in _flag_values(argv, ENV_FLAGS):
        name, _, pair_value = value.partition("=")
        pairs[name] = pair_value
    register_environ(pairs)
    register_secret(*_flag_values(argv, SECRET_FLAGS))
    for name in _flag_values(argv, SECRET_ENV_FLAGS):
        register_secret(pairs.get(name) or environ.get(name))
    register_secret(*(password for arg in argv for password in url_passwords(arg)))


def _flag_values(argv: Sequence[str], flags: Iterable[str]) -> list[str]:
    """The values of ``FLAG VALUE`` and ``FLAG=VALUE`` items of ``argv`` (exact flag names:
    lkeval's parser takes no abbreviations)."""
    flags = tuple(flags)
    values = []
    for index, arg in enumerate(argv):
        if arg in flags and index + 1 < len(argv):
            values.append(argv[index + 1])
        elif arg.startswith(tuple(f + "=" for f in flags)):
            values.append(arg.split("=", 1)[1])
    return values


def reset_process_masker() -> None:
    """Forget every secret; for a process that runs lk-eval more than once (tests)."""
    global _PROCESS
    _PROCESS = None


def clip(text: str, limit: int, ellipsis: str = "…") -> str:
    """``text`` masked with the process's secrets, then cut to ``limit`` characters.

    Use this (never ``text[:n]``) wherever text that may hold a secret is shortened.
    """
    return process_masker().clip(text, limit, ellipsis)


def mask(text: str) -> str:
    """``text`` masked with the process's secrets."""
    return process_masker().mask(text)


def mask_results(value: T) -> T:
    """A copy of a frozen result model (or any nest of them) masked with the process's
    secrets."""
    return process_masker().mask_results(value)


def is_secret_name(name: str) -> bool:
    """Whether an environment variable of this name is treated as a secret."""
    upper = name.upper()
    return upper in KNOWN_SECRET_NAMES or any(part in upper for part in SECRET_NAME_PARTS)


def redact_argv(argv: Iterable[str]) -> tuple[str, ...]:
    """``argv`` with secret flag values (``--github-token X``, ``--env SOME_KEY=X``) and every
    known secret replaced by ``***``.

    A results file records its command line and is kept as an artifact, and the Action's
    entrypoint prints the command line it runs: a token given on it must travel with neither.
    """
    out: list[str] = []
    pending: str | None = None
    for arg in argv:
        if pending is not None:
            out.append(_redact_value(pending, arg))
            pending = None
        elif arg in SECRET_FLAGS or arg in ENV_FLAGS:
            out.append(arg)
            pending = arg
        elif "=" in arg and arg.split("=", 1)[0] in (*SECRET_FLAGS, *ENV_FLAGS):
            flag, value = arg.split("=", 1)
            out.append(f"{flag}={_redact_value(flag, value)}")
        else:
            out.append(arg)
    masker = process_masker()
    return tuple(masker.mask(a) for a in out)


def _redact_value(flag: str, value: str) -> str:
    if flag in SECRET_FLAGS:
        return MASK
    name, sep, _ = value.partition("=")
    return f"{name}={MASK}" if sep and is_secret_name(name) else value


def _is_existing_path(value: str) -> bool:
    """A value naming an existing file (``SSH_KEY_PATH=/home/me/.ssh/id``) is not a secret;
    masking it would hide paths all over the reports."""
    return os.path.isabs(value) and os.path.exists(value)


#: The user-info part of every URL in a text (up to the last ``@`` before the path).
_URL_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://([^\s/?#]*)@")


def url_passwords(value: str) -> list[str]:
    """The password of every URL in ``value``, wherever it sits (``DB=postgres://u:PW@h``,
    two index URLs in one variable, a ``--env`` pair inside ``extra-args``), as written and,
    when it differs, percent-decoded."""
    found: list[str] = []
    for match in _URL_USERINFO.finditer(value):
        _, sep, password = match.group(1).partition(":")
        if sep and password:
            found += dict.fromkeys((password, unquote(password)))
    return found


def _escaped_forms(secret: str) -> set[str]:
    """The forms a secret takes once a reporter escaped it (XML/HTML, JSON, workflow data)."""
    return {
        secret,
        html.escape(secret, quote=False),
        html.escape(secret, quote=True),
        json.dumps(secret, ensure_ascii=False)[1:-1],
        json.dumps(secret)[1:-1],
        secret.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"),
        # ... and with ``##[`` broken, as lkeval.text.untrusted writes every command's text
        secret.replace("%", "%25")
        .replace("\r", "%0D")
        .replace("\n", "%0A")
        .replace("##[", "##\u200b["),
        secret.replace("|", "\\|"),
        markdown_entities(html.escape(secret, quote=False)),
    }


#: Characters that Markdown (GitHub's) could read as syntax, written as numeric entities by
#: :func:`lkeval.text.untrusted.md_text`; kept here because a secret must be recognised
#: in that form too.
MARKDOWN_SYNTAX = "\\`*_[]|~#"


def markdown_entities(text: str) -> str:
    """``text`` with every :data:`MARKDOWN_SYNTAX` character as a numeric entity."""
    return "".join(f"&#{ord(c)};" if c in MARKDOWN_SYNTAX else c for c in text)
