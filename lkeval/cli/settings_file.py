"""``lkeval run``'s settings from the project's own file: ``[tool.lkeval]`` in pyproject.toml,
or an ``lkeval.toml``.

As ruff and pytest do, the file holds the settings a project keeps (the agent, the scenarios, the
models, the gate) and the command line wins. A key is a ``run`` flag's name without its dashes
(``judge-model = "gpt-4.1-mini"``; ``judge_model`` is read the same). The file is turned into
flags put before the command line's, so one parser checks both and the last word is the user's:
a flag given on the command line replaces the file's value, a repeatable one (``env``) adds to it.

Found like ruff's: the nearest ``lkeval.toml``, or ``pyproject.toml`` with a ``[tool.lkeval]``
table, in the working directory or one of its parents (the Action runs in the checkout, so it
reads the same file). Unknown keys are errors with file:line and "did you mean"; so is a key
that could hold a secret (``github-token``: keys and tokens come from the environment only).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lkeval.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML with tomli (pyproject's dependency)
    import tomli as tomllib

#: The flags a file may not set: they carry secrets, or only make sense on one command line.
REFUSED = {
    "github-token": "a token comes from the environment (GITHUB_TOKEN), never from a file",
    "help": "not a setting",
    "no-settings": "only on the command line: it says not to read this file",
}

#: Flags whose values are paths: a relative one in the file is relative to the file's folder
#: (as ruff's are), so ``lkeval run`` from a subfolder finds the same agent.
PATH_METAVARS = {"AGENT.py", "SCENARIOS.yaml", "PATH", "DIR", "FILE", "PATH|github:BRANCH"}

SETTINGS_FILE = "lkeval.toml"
PYPROJECT = "pyproject.toml"


@dataclass(frozen=True)
class Settings:
    """The file read, and the flags it stands for (to put before the command line's)."""

    path: Path
    table: str  # "[tool.lkeval]" or "lkeval.toml"
    flags: tuple[str, ...]

    def describe(self) -> str:
        """The line ``lkeval run`` prints, so nobody wonders where a setting came from."""
        return f"lk-eval: settings from {self.path} {self.table} (the command line wins)"


def find_settings_file(start: Path) -> tuple[Path, str] | None:
    """The nearest lkeval.toml, or pyproject.toml with a [tool.lkeval] table, from ``start``
    upwards; None when there is none."""
    for folder in (start, *start.parents):
        own = folder / SETTINGS_FILE
        if own.is_file():
            return own, SETTINGS_FILE
        pyproject = folder / PYPROJECT
        if pyproject.is_file() and re.search(
            r"^\s*\[\s*tool\s*\.\s*lkeval\s*[\].]", _read(pyproject), re.MULTILINE
        ):
            return pyproject, "[tool.lkeval]"
    return None


def load_settings(
    parser: argparse.ArgumentParser, start: Path, applies: Callable[[str], bool] | None = None
) -> Settings | None:
    """Read the settings file that applies at ``start`` against ``parser`` (``run``'s).

    ``applies``: which of ``run``'s flags (by name, no dashes) the command takes; the file's
    other keys are checked all the same and left out (``lkeval dev`` has no ``python``)."""
    found = find_settings_file(start)
    if found is None:
        return None
    path, table = found
    text = _read(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    if table == "[tool.lkeval]":
        data = data.get("tool", {}).get("lkeval", {})
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: {table} must be a table of settings")
    actions = _flag_actions(parser)
    flags: list[str] = []
    for key, value in data.items():
        where = f"{path}:{_line_of(text, key)}"
        given = list(_flags_for(key, value, actions, where, path.parent.resolve()))
        if applies is None or applies(key.replace("_", "-")):
            flags.extend(given)
    return Settings(path, table, tuple(flags))


def _flags_for(
    key: str, value: Any, actions: dict[str, argparse.Action], where: str, folder: Path
) -> Iterator[str]:
    name = key.replace("_", "-")
    if name in REFUSED:
        raise ConfigError(f"{where}: {key}: {REFUSED[name]}")
    action = actions.get(name)
    if action is None:
        close = difflib.get_close_matches(name, list(actions), n=1)
        tip = f" (did you mean '{close[0]}'?)" if close else ""
        raise ConfigError(f"{where}: unknown setting '{key}'{tip}")
    flag = f"--{name}"
    if action.nargs == 0:  # a switch: true sets it, false leaves the default
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: {key}: expected true or false, got {value!r}")
        if value:
            yield flag
        return
    many = action.nargs in ("+", "*") or isinstance(action, argparse._AppendAction)
    values = value if isinstance(value, list) else [value]
    if isinstance(value, list) and not many:
        raise ConfigError(f"{where}: {key}: takes one value, got a list")
    if not values:
        raise ConfigError(f"{where}: {key}: an empty list sets nothing; leave the key out")
    texts = [_scalar(key, item, where) for item in values]
    if action.metavar in PATH_METAVARS:
        texts = [_from_folder(text, folder) for text in texts]
    if isinstance(action, argparse._AppendAction):
        for text in texts:
            yield flag
            yield text
    else:
        yield flag
        yield from texts


def _scalar(key: str, value: Any, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError(f"{where}: {key}: expected a string or a number, got {value!r}")
    return str(value)


def _from_folder(value: str, folder: Path) -> str:
    """A relative path of the file, as seen from the working directory."""
    if value.startswith("github:") or Path(value).is_absolute():
        return value
    here = Path.cwd().resolve()
    if folder == here:
        return value
    return os.path.relpath(folder / value, here)


def _flag_actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {
        option[2:]: action
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--")
    }


def _line_of(text: str, key: str) -> int:
    """The line that sets ``key`` (tomllib keeps no positions): the first ``key =`` line."""
    pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return 1


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it: {exc}") from None


def with_settings(argv: Sequence[str], settings: Settings | None) -> list[str]:
    """``argv`` with the file's flags put right after ``run`` (before the user's own)."""
    if settings is None:
        return list(argv)
    at = next(i for i, word in enumerate(argv) if not word.startswith("-")) + 1
    return [*argv[:at], *settings.flags, *argv[at:]]
