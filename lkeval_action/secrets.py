"""The entrypoint's part of masking: tell the runner every secret first, never echo one.

lkeval masks everything it prints itself (``lkeval.text.masking``); the entrypoint runs
before it, prints lkeval's command line and runs the user's install command, so it announces
the secrets it can see with ``::add-mask::`` before printing anything, and prints the command
line with secret values replaced. The name rule is lkeval's (a test keeps them equal); standard
library only, like the rest of the entrypoint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import urlsplit

from lkeval_action.commands import escape

SECRET_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
MIN_SECRET_LENGTH = 6
MASK = "***"


def is_secret_name(name: str) -> bool:
    """Whether a variable of this name holds a secret (lkeval's rule)."""
    upper = name.upper()
    return any(part in upper for part in SECRET_NAME_PARTS)


def _flag_values(argv: Sequence[str], flag: str) -> list[str]:
    values = []
    for index, arg in enumerate(argv):
        if arg == flag and index + 1 < len(argv):
            values.append(argv[index + 1])
        elif arg.startswith(flag + "="):
            values.append(arg.split("=", 1)[1])
    return values


def secret_values(environ: Mapping[str, str], argv: Sequence[str] = ()) -> list[str]:
    """Secrets of the environment (by name) and of lkeval's argv (``--env NAME=VALUE`` with a
    secret name, ``--secret-env NAME``, ``--github-token``), long enough to be specific."""
    found: list[str] = [v for k, v in environ.items() if is_secret_name(k)]
    found += [p for p in map(_url_password, environ.values()) if p]  # PIP_INDEX_URL=...:pw@
    env_pairs = dict(item.partition("=")[::2] for item in _flag_values(argv, "--env"))
    found += [v for k, v in env_pairs.items() if is_secret_name(k)]
    for name in _flag_values(argv, "--secret-env"):
        found.append(env_pairs.get(name) or environ.get(name, ""))
    found += _flag_values(argv, "--github-token")
    values: list[str] = []
    for value in found:
        for part in (value, *value.splitlines()):
            part = part.strip()
            if len(part) >= MIN_SECRET_LENGTH and part not in values:
                values.append(part)
    return values


def _url_password(value: str) -> str | None:
    if "://" not in value or "@" not in value:
        return None
    try:
        return urlsplit(value.strip()).password
    except ValueError:
        return None


def mask_commands(values: Iterable[str]) -> list[str]:
    """``::add-mask::`` lines (the runner hides these values from then on)."""
    return [f"::add-mask::{escape(value)}" for value in values]


def redacted(argv: Sequence[str], values: Iterable[str]) -> list[str]:
    """``argv`` for printing: secret ``--env`` values, tokens and known secrets as ``***``."""
    out: list[str] = []
    pending = ""
    for arg in argv:
        if pending == "--github-token":
            arg = MASK
        elif pending == "--env" or arg.startswith("--env="):
            prefix = "--env=" if arg.startswith("--env=") else ""
            name, sep, _ = arg.removeprefix(prefix).partition("=")
            if sep and is_secret_name(name):
                arg = f"{prefix}{name}={MASK}"
        elif arg.startswith("--github-token="):
            arg = f"--github-token={MASK}"
        pending = arg if arg in ("--env", "--github-token") else ""
        out.append(arg)
    hidden = sorted(values, key=len, reverse=True)
    for index, arg in enumerate(out):
        for value in hidden:
            arg = arg.replace(value, MASK)
        out[index] = arg
    return out
