"""lkeval's own errors, in the Action, name the input the user set rather than the option.

A user of the Action wrote ``pr: abc`` in their workflow, never ``--pr``; an error that says
``argument --pr: invalid int value`` sends them looking for a flag they do not have. The
Action's entrypoint maps inputs to options and tells lkeval which input each option came
from, in :data:`INPUT_NAMES_VARIABLE` (a JSON object, ``{"--pr": "pr"}``); the error boundary
and the argument parser pass their messages through :func:`for_action`. Outside the Action the
variable is not set and messages are unchanged.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping

from lkeval.text.untrusted import command

INPUT_NAMES_VARIABLE = "LKEVAL_INPUT_NAMES"
_OPTION = re.compile(r"(?:argument )?(?<![\w-])(--[A-Za-z0-9][A-Za-z0-9-]*)(?:/-[A-Za-z])?")


def input_names(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Option → input name, as the entrypoint gave it; {} outside the Action or when garbled."""
    raw = (os.environ if environ is None else environ).get(INPUT_NAMES_VARIABLE, "")
    try:
        names = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    if not isinstance(names, dict):
        return {}
    return {k: v for k, v in names.items() if isinstance(k, str) and isinstance(v, str)}


def name_inputs(message: str, names: Mapping[str, str]) -> str:
    """``message`` with every option that came from an input named as that input."""
    if not names:
        return message

    def replace(match: re.Match[str]) -> str:
        name = names.get(match[1])
        return f"input `{name}`" if name else match[0]

    return _OPTION.sub(replace, message)


def for_action(line: str, environ: Mapping[str, str] | None = None) -> str:
    """An error line as the Action user should read it: inputs named, and an ``::error``
    annotation (escaped: the message may quote a value from the workflow); else unchanged."""
    names = input_names(environ)
    if not names:
        return line
    return command("error", name_inputs(line, names))
