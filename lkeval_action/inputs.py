"""The Action's inputs, as the runner hands them over, checked and mapped to lkeval's argv.

The runner sets every input of action.yml as ``INPUT_<NAME>`` (upper-cased, hyphens kept;
the default when the workflow gives none) and enforces neither ``required:`` nor any type, so
this module does. Booleans are ``true`` or ``false``; a value that starts with ``-`` is
refused, so no input can smuggle in an option of its own (only ``extra-args`` is meant for
that); ``agent`` and ``scenarios`` must be there. Every error names the input the user set.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

RUN = "run"
REPORT = "report"
CALIBRATE = "calibrate"
COMMANDS = (RUN, REPORT, CALIBRATE)
#: The commands that write reports (calibrate writes the results file back, nothing else).
REPORTING = (RUN, REPORT)
#: The inputs ``lkeval calibrate`` also takes: the judge, the scenarios and the results.
JUDGING = (RUN, CALIBRATE)
TRUE_WORDS = ("true", "True", "TRUE")
FALSE_WORDS = ("false", "False", "FALSE")
INSTALL_AUTO = "auto"
INSTALL_NONE = "none"
#: The input of lk-eval 0.1 that the runner also passed as the container's command line.
RENAMED = {"args": "extra-args"}


class InputError(Exception):
    """An action input is missing or malformed; the message starts with the input's name."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"input `{name}`: {message}")
        self.name = name


@dataclass(frozen=True)
class Input:
    """One input of action.yml and how it reaches lkeval.

    ``kind``: ``value`` → ``FLAG VALUE``; ``list`` → ``FLAG ITEM ITEM...`` (the option takes
    several values); ``repeat`` → ``FLAG ITEM`` per item; ``bool`` → ``FLAG`` or
    ``off_flag``; ``judges`` → ``FLAG a,b``; ``github`` → ``FLAG github:`` for ``auto``, else
    ``FLAG VALUE``; ``setting``, ``secret`` and ``extra`` are handled
    by :func:`build_plan` itself. ``default`` mirrors action.yml (a drift test checks) so a
    run outside the runner, which sets every input that has a default, behaves the same.
    """

    name: str
    flag: str | None = None
    kind: str = "value"
    default: str = ""
    commands: tuple[str, ...] = (RUN,)
    required: tuple[str, ...] = ()  # the commands that cannot go without it
    off_flag: str | None = None

    @property
    def variable(self) -> str:
        """The environment variable the runner sets: ``INPUT_CALLER-MODEL``."""
        return input_variable(self.name)


def input_variable(name: str) -> str:
    """``INPUT_`` + the name as the runner spells it (spaces → ``_``, upper case, ``-`` kept)."""
    return "INPUT_" + name.replace(" ", "_").upper()


#: Every input of action.yml, in the order its flags are put on the command line.
INPUTS: tuple[Input, ...] = (
    Input("command", kind="setting", default=RUN, commands=COMMANDS),
    Input("working-directory", kind="setting", default=".", commands=COMMANDS),
    Input("install", kind="setting", default=INSTALL_AUTO),
    # `run` reads [tool.lkeval] in the checkout's pyproject.toml (or lkeval.toml) and says
    # itself when neither the file nor the inputs name the agent or the scenarios
    Input("agent", "--agent"),
    Input("scenarios", "--scenarios", kind="list", required=(CALIBRATE,), commands=JUDGING),
    Input("caller-model", "--caller-model"),
    Input("caller-base-url", "--caller-base-url"),
    Input("judge-model", "--judge-model", commands=JUDGING),
    Input("judge-base-url", "--judge-base-url", commands=JUDGING),
    Input("judges", "--judges", kind="judges"),
    Input("rejudge", "--rejudge"),
    Input("maybe-is-pass", "--maybe-is-pass", kind="bool", default="false", commands=JUDGING),
    Input("allow-weak-judge", "--allow-weak-judge", kind="bool", default="false"),
    Input("repeat", "--repeat"),
    Input("min-pass", "--min-pass"),
    Input("concurrency", "--concurrency"),
    Input("max-turns", "--max-turns"),
    Input("boot-timeout", "--boot-timeout"),
    Input("turn-timeout", "--turn-timeout"),
    Input("mode", "--mode"),
    Input("speech", "--speech"),
    Input("voice", "--voice"),
    Input("impair", "--impair"),
    Input("shard", "--shard"),
    Input("tag", "--tag", kind="repeat"),
    Input("match", "--match", kind="repeat"),
    Input("quarantine", "--quarantine", kind="repeat"),
    Input("cassettes", "--cassettes"),
    Input("cassette-mode", "--cassette-mode"),
    Input("cassettes-from", "--cassettes-from", kind="github"),
    Input("results", "--results", default="lkeval-results/results.json", commands=COMMANDS),
    Input("junit", "--junit", default="lkeval-results/junit.xml", commands=REPORTING),
    Input("markdown", "--markdown", commands=REPORTING),
    Input("baseline", "--baseline", kind="github", commands=REPORTING),
    Input("baseline-artifact", "--baseline-artifact", commands=REPORTING),
    Input("fail-on", "--fail-on", default="any", commands=REPORTING),
    Input("min-pass-rate", "--min-pass-rate", commands=REPORTING),
    Input("comment", "--comment", default="update", commands=REPORTING),
    Input("comment-id", "--comment-id", default="default", commands=REPORTING),
    Input("title", "--title", commands=REPORTING),
    Input("comment-author", "--comment-author", commands=REPORTING),
    Input(
        "summary",
        "--summary",
        kind="bool",
        default="true",
        commands=REPORTING,
        off_flag="--no-summary",
    ),
    Input("pr", "--pr", commands=REPORTING),
    Input("github-token", kind="secret", commands=REPORTING),
    Input("extra-args", kind="extra", commands=COMMANDS),
)
INPUTS_BY_NAME = {i.name: i for i in INPUTS}
#: Which input each lkeval option came from, so lkeval's own errors can name the input.
INPUT_OF_FLAG = {i.flag: i.name for i in INPUTS if i.flag} | {
    i.off_flag: i.name for i in INPUTS if i.off_flag
}


@dataclass(frozen=True)
class Plan:
    """What the action will do: where, which install, and lkeval's argv and extra environment."""

    command: str
    working_directory: str
    install: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    #: The files lkeval is asked to write (results, JUnit, Markdown), as given.
    outputs: tuple[str, ...] = ()


def read_input(environ: Mapping[str, str], spec: Input) -> str:
    """The input's value, stripped; its default when the runner did not set it at all.

    An input set to the empty string stays empty: ``junit: ''`` turns the JUnit file off.
    """
    value = environ.get(spec.variable)
    return (spec.default if value is None else value).strip()


def split_words(name: str, value: str) -> list[str]:
    """A list input's items: spaces or newlines separate them, quotes keep a space inside one."""
    try:
        return shlex.split(value)
    except ValueError as exc:
        raise InputError(name, f"{exc} in {value!r}") from None


def refuse_flag(name: str, value: str) -> str:
    """``value``, unless it would read as an option: only ``extra-args`` may pass options."""
    if value.startswith("-"):
        raise InputError(
            name,
            f"{value!r} looks like a command-line option; pass extra lkeval options with "
            "the `extra-args` input",
        )
    return value


def parse_bool(name: str, value: str) -> bool:
    """``true``/``false`` only (as GitHub's own toolkit reads them): ``yes`` or ``1`` is a typo."""
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    raise InputError(name, f"must be true or false, not {value!r}")


def flag_arguments(spec: Input, value: str) -> list[str]:
    """The lkeval arguments one input becomes (nothing when it is empty)."""
    assert spec.flag is not None
    if spec.kind == "bool":
        if parse_bool(spec.name, value):
            return [spec.flag]
        return [spec.off_flag] if spec.off_flag else []
    if not value:
        return []
    if spec.kind == "value":
        return [spec.flag, refuse_flag(spec.name, value)]
    if spec.kind == "github":  # `auto`: the repository's default branch
        return [spec.flag, "github:" if value == "auto" else refuse_flag(spec.name, value)]
    items = [refuse_flag(spec.name, item) for item in split_words(spec.name, value)]
    if spec.kind == "list":
        return [spec.flag, *items] if items else []
    if spec.kind == "repeat":
        return [arg for item in items for arg in (spec.flag, item)]
    if spec.kind == "judges":
        names = [n for item in items for n in item.split(",") if n]
        return [spec.flag, ",".join(names)] if names else []
    raise AssertionError(f"unknown input kind {spec.kind!r}")


def _either(words: tuple[str, ...]) -> str:
    """``run``, ``run or report``, ``run, report or calibrate``."""
    return " or ".join(filter(None, (", ".join(words[:-1]), words[-1])))


def check_inputs(environ: Mapping[str, str], values: Mapping[str, str]) -> str:
    """The command, once every input fits it; :class:`InputError` for the first that does not."""
    for old, new in RENAMED.items():
        if input_variable(old) in environ:
            raise InputError(
                old,
                f"renamed to `{new}` (the runner gives an input named `{old}` a meaning of "
                f"its own); write `{new}:` instead",
            )
    command = values["command"]
    if command not in COMMANDS:
        raise InputError("command", f"must be {_either(COMMANDS)}, not {command!r}")
    for spec in INPUTS:
        value = values[spec.name]
        # the token's default is the runner's own token, always set: unused, never refused
        if command not in spec.commands and value != spec.default and spec.kind != "secret":
            raise InputError(spec.name, f"applies to command: {_either(spec.commands)} only")
        if command in spec.required and not value:
            raise InputError(spec.name, f"required with command: {command}")
    return command


def build_plan(environ: Mapping[str, str]) -> Plan:
    """Turn the ``INPUT_*`` variables into a :class:`Plan`; :class:`InputError` when they are wrong.

    Pure (reads only ``environ``), so every input's mapping is tested without running anything.
    """
    values = {spec.name: read_input(environ, spec) for spec in INPUTS}
    command = check_inputs(environ, values)
    argv = [command]
    env: dict[str, str] = {}
    for spec in INPUTS:
        value = values[spec.name]
        if command not in spec.commands:
            continue
        if spec.kind == "setting":
            if value:
                refuse_flag(spec.name, value)
        elif spec.kind == "secret":
            if value:
                env["GITHUB_TOKEN"] = refuse_flag(spec.name, value)
        elif spec.kind == "extra":
            argv += split_words(spec.name, value)
        else:
            argv += flag_arguments(spec, value)
    outputs = tuple(
        values[name]
        for name in ("results", "junit", "markdown")
        if values[name] and command in INPUTS_BY_NAME[name].commands
    )
    return Plan(
        command=command,
        working_directory=values["working-directory"] or ".",
        install=values["install"] or INSTALL_AUTO,
        argv=tuple(argv),
        env=env,
        outputs=outputs,
    )
