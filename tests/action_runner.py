"""What GitHub's runner does with a Docker action step: its environment and its argv.

A model of ``ContainerActionHandler`` and ``ActionManifestManager`` (actions/runner,
src/Runner.Worker), as far as they decide what the container gets:

* Every input declared in action.yml is set: its ``default`` (``''`` when it has none;
  ``${{ github.token }}`` evaluated), overridden by the step's ``with:``. A ``with:`` key that
  action.yml does not declare is still passed (the runner only warns "Unexpected input(s)").
  Each becomes ``INPUT_`` + the name with spaces as ``_``, upper-cased, hyphens kept.
* The container's arguments: with ``runs.args`` declared, each item (``${{ inputs.x }}``
  evaluated) is wrapped in double quotes (inner ones escaped) and appended; without it, the
  input named ``args`` (any case) is appended to the ``docker run`` line as it is. The line is
  then split into argv by .NET's rules (whitespace separates, double quotes group, a
  backslash escapes a quote).
* The workspace is mounted at ``/github/workspace`` and is the working directory; ``HOME`` is
  ``/github/home``; the ``GITHUB_*`` context comes along.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

EXPRESSION = re.compile(r"\$\{\{\s*([a-zA-Z0-9_.-]+)\s*\}\}")


@dataclass(frozen=True)
class ContainerStep:
    """What the container is started with."""

    env: dict[str, str]
    argv: list[str]


def input_variable(name: str) -> str:
    """``INPUT_`` + the name as the runner spells it (AddInputsToEnvironment)."""
    return "INPUT_" + name.replace(" ", "_").upper()


def evaluate(text: str, context: Mapping[str, str]) -> str:
    """``${{ a.b }}`` replaced from ``context`` (the only expressions our action.yml uses)."""
    return EXPRESSION.sub(lambda m: context[m.group(1)], text)


def split_command_line(line: str) -> list[str]:
    """.NET's ``ParseArgumentsIntoList``: how the runner's ``docker run`` line becomes argv."""
    args: list[str] = []
    current: list[str] = []
    in_quotes = started = False
    i = 0
    while i < len(line):
        char = line[i]
        if char == "\\":
            slashes = len(line[i:]) - len(line[i:].lstrip("\\"))
            if i + slashes < len(line) and line[i + slashes] == '"':
                current.append("\\" * (slashes // 2))
                if slashes % 2:
                    current.append('"')
                    i += slashes + 1
                else:
                    i += slashes
                started = True
                continue
            current.append("\\" * slashes)
            i += slashes
            started = True
            continue
        if char == '"':
            in_quotes = not in_quotes
            started = True
        elif char.isspace() and not in_quotes:
            if started:
                args.append("".join(current))
                current, started = [], False
        else:
            current.append(char)
            started = True
        i += 1
    if started:
        args.append("".join(current))
    return args


def container_step(
    action: Mapping[str, Any], with_: Mapping[str, str], *, token: str
) -> ContainerStep:
    """The environment (inputs only) and argv the runner gives the action's container."""
    context = {"github.token": token}
    inputs = {
        name: evaluate(str((spec or {}).get("default", "")), context)
        for name, spec in action.get("inputs", {}).items()
    }
    inputs.update(with_)
    for name in with_:
        inputs[name] = evaluate(with_[name], context)
    env = {input_variable(name): value for name, value in inputs.items()}
    runs = action["runs"]
    if runs.get("args") is not None:
        input_context = {f"inputs.{k}": v for k, v in inputs.items()} | context
        line = "".join(
            ' "' + evaluate(str(arg), input_context).replace('"', '\\"') + '"'
            for arg in runs["args"]
        )
    else:
        line = next((v for k, v in inputs.items() if k.lower() == "args"), "")
    return ContainerStep(env=env, argv=split_command_line(line))


def runner_commands(output: str) -> list[str]:
    """The commands GitHub's runner would execute in ``output``: lines split at LF, CR or
    CRLF; ``::`` at the start after whitespace, or ``##[`` anywhere; none between
    ``::stop-commands::TOKEN`` and ``::TOKEN::``."""
    commands: list[str] = []
    stopped: str | None = None
    for line in re.split(r"\r\n|\r|\n", output):
        text = line.lstrip()
        if stopped is not None:
            if text == f"::{stopped}::":
                stopped = None
            continue
        if text.startswith("::stop-commands::"):
            stopped = text.removeprefix("::stop-commands::")
            continue
        if text.startswith("::") or "##[" in line:
            commands.append(text)
    return commands


def legacy_markers(output: str) -> list[str]:
    """Lines of ``output`` carrying ``##[``, the old command form: the runner reads it
    anywhere in a line that is not a ``::`` command, and its log viewer reads it from the
    stored log whatever the line (``::group::T`` is stored as ``##[group]T``, so an ``##[``
    in a group title is in the log), stop-commands blocks included. Only an ``::add-mask::``
    line may carry one: its value must be the secret exactly, and it is never shown."""
    return [
        line
        for line in re.split(r"\r\n|\r|\n", output)
        if "##[" in line and not line.lstrip().startswith("::add-mask::")
    ]
