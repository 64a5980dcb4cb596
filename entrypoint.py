"""The lk-eval container's entrypoint: GitHub Action inputs, or plain lkeval arguments.

Two ways in:

* With arguments (``docker run IMAGE run --agent agent.py ...``), they go to ``python -m lkeval``
  unchanged: the container is then just lkeval with its dependencies.
* Without arguments, as the GitHub Action: the runner hands each input over as ``INPUT_<NAME>``
  (upper-cased, hyphens kept) and enforces neither ``required:`` nor any type, so this file
  does. Booleans are ``true`` or ``false``; a value that starts with ``-`` is refused, so no
  input can smuggle in an option of its own (only ``args`` is meant for that); ``agent`` and
  ``scenarios`` must be there. It then changes into ``working-directory``, installs the
  agent's own dependencies into this Python (the agent runs on it), and runs lkeval.

Inputs become argv items here and never pass through a shell, except ``install`` when it is a
command, which is the user's own line run with ``sh -c`` and has nothing else put into it. The
GitHub token goes to lkeval as ``GITHUB_TOKEN`` in its environment, never on its command line,
which a results file records and ``ps`` shows.

In the container this process is PID 1, which the kernel shields from every signal it has no
handler for; so it stays the parent, forwards SIGINT/SIGTERM/SIGHUP to lkeval (which then
writes partial results and exits 130/143) and reaps orphaned processes.

Standard library only: it must work before anything else is known to, and it is tested by
running it exactly as the container does.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EXIT_USAGE = 2
EXIT_INTERNAL = 4

RUN = "run"
REPORT = "report"
COMMANDS = (RUN, REPORT)
TRUE_WORDS = ("true", "True", "TRUE")
FALSE_WORDS = ("false", "False", "FALSE")
INSTALL_AUTO = "auto"
INSTALL_NONE = "none"
#: Signals passed on to lkeval: Ctrl+C, ``docker stop``/job cancellation, a closed terminal.
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class InputError(Exception):
    """An action input is missing or malformed; the message names the input."""


class InstallError(Exception):
    """Installing the agent's dependencies failed; the message says which command."""


@dataclass(frozen=True)
class Input:
    """One input of action.yml and how it reaches lkeval.

    ``kind``: ``value`` → ``FLAG VALUE``; ``list`` → ``FLAG ITEM ITEM...`` (the option takes
    several values); ``repeat`` → ``FLAG ITEM`` per item; ``bool`` → ``FLAG`` or
    ``off_flag``; ``judges`` → ``FLAG a,b``; ``setting``, ``secret`` and ``args`` are handled
    by :func:`build_plan` itself. ``default`` mirrors action.yml (a drift test checks) so a
    run outside the runner, which sets every input that has a default, behaves the same.
    """

    name: str
    flag: str | None = None
    kind: str = "value"
    default: str = ""
    commands: tuple[str, ...] = (RUN,)
    required: bool = False
    off_flag: str | None = None

    @property
    def variable(self) -> str:
        """The environment variable the runner sets: ``INPUT_CALLER-MODEL``."""
        return "INPUT_" + self.name.upper()


#: Every input of action.yml, in the order its flags are put on the command line.
INPUTS: tuple[Input, ...] = (
    Input("command", kind="setting", default=RUN, commands=COMMANDS),
    Input("working-directory", kind="setting", default=".", commands=COMMANDS),
    Input("install", kind="setting", default=INSTALL_AUTO),
    Input("agent", "--agent", required=True),
    Input("scenarios", "--scenarios", kind="list", required=True),
    Input("caller-model", "--caller-model"),
    Input("caller-base-url", "--caller-base-url"),
    Input("judge-model", "--judge-model"),
    Input("judge-base-url", "--judge-base-url"),
    Input("judges", "--judges", kind="judges"),
    Input("rejudge", "--rejudge"),
    Input("maybe-is-pass", "--maybe-is-pass", kind="bool", default="false"),
    Input("repeat", "--repeat"),
    Input("min-pass", "--min-pass"),
    Input("concurrency", "--concurrency"),
    Input("max-turns", "--max-turns"),
    Input("boot-timeout", "--boot-timeout"),
    Input("turn-timeout", "--turn-timeout"),
    Input("shard", "--shard"),
    Input("tag", "--tag", kind="repeat"),
    Input("match", "--match", kind="repeat"),
    Input("quarantine", "--quarantine", kind="repeat"),
    Input("results", "--results", default="lkeval-results/results.json", commands=COMMANDS),
    Input("junit", "--junit", default="lkeval-results/junit.xml", commands=COMMANDS),
    Input("markdown", "--markdown", commands=COMMANDS),
    Input("baseline", "--baseline", commands=COMMANDS),
    Input("fail-on", "--fail-on", default="any", commands=COMMANDS),
    Input("min-pass-rate", "--min-pass-rate", commands=COMMANDS),
    Input("comment", "--comment", default="update", commands=COMMANDS),
    Input("comment-id", "--comment-id", default="default", commands=COMMANDS),
    Input("summary", "--summary", kind="bool", default="true", commands=COMMANDS,
          off_flag="--no-summary"),
    Input("pr", "--pr", commands=COMMANDS),
    Input("github-token", kind="secret", commands=COMMANDS),
    Input("args", kind="args", commands=COMMANDS),
)
INPUTS_BY_NAME = {i.name: i for i in INPUTS}


@dataclass(frozen=True)
class Plan:
    """What the action will do: where, which install, and lkeval's argv and extra environment."""

    command: str
    working_directory: str
    install: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class InstallPlan:
    """The commands that install an agent's dependencies, and what to say about them."""

    what: str
    commands: tuple[tuple[str, ...], ...] = ()
    notice: str | None = None


# --- inputs → plan ---------------------------------------------------------------------------


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
        raise InputError(f"input '{name}': {exc} in {value!r}") from None


def refuse_flag(name: str, value: str) -> str:
    """``value``, unless it would read as an option: only ``args`` may pass options."""
    if value.startswith("-"):
        raise InputError(
            f"input '{name}' is {value!r}, which looks like a command-line option; "
            "pass extra lkeval options with the 'args' input"
        )
    return value


def parse_bool(name: str, value: str) -> bool:
    """``true``/``false`` only (as GitHub's own toolkit reads them): ``yes`` or ``1`` is a typo."""
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    raise InputError(f"input '{name}' must be true or false, not {value!r}")


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
    items = [refuse_flag(spec.name, item) for item in split_words(spec.name, value)]
    if spec.kind == "list":
        return [spec.flag, *items] if items else []
    if spec.kind == "repeat":
        return [arg for item in items for arg in (spec.flag, item)]
    if spec.kind == "judges":
        names = [n for item in items for n in item.split(",") if n]
        return [spec.flag, ",".join(names)] if names else []
    raise AssertionError(f"unknown input kind {spec.kind!r}")


def build_plan(environ: Mapping[str, str]) -> Plan:
    """Turn the ``INPUT_*`` variables into a :class:`Plan`; :class:`InputError` when they are wrong.

    Pure (reads only ``environ``), so every input's mapping is tested without running anything.
    """
    values = {spec.name: read_input(environ, spec) for spec in INPUTS}
    command = values["command"]
    if command not in COMMANDS:
        raise InputError(f"input 'command' must be {' or '.join(COMMANDS)}, not {command!r}")
    for spec in INPUTS:
        value = values[spec.name]
        if command not in spec.commands and value != spec.default:
            raise InputError(f"input '{spec.name}' applies to command: {RUN} only")
        if spec.required and command in spec.commands and not value:
            raise InputError(f"input '{spec.name}' is required")

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
        elif spec.kind == "args":
            argv += split_words(spec.name, value)
        else:
            argv += flag_arguments(spec, value)
    return Plan(
        command=command,
        working_directory=values["working-directory"] or ".",
        install=values["install"] or INSTALL_AUTO,
        argv=tuple(argv),
        env=env,
    )


# --- installing the agent's dependencies -----------------------------------------------------


def install_plan(
    spec: str, directory: Path, *, python: str, uv: str | None, scratch: Path
) -> InstallPlan:
    """Which commands install the agent's dependencies for ``install: spec`` in ``directory``.

    ``auto`` looks for, in order: ``uv.lock`` (exported and installed by uv, so the versions
    are the locked ones; needs ``uv``, which the image has), ``requirements.txt``
    (``pip install -r``) and ``pyproject.toml`` (``pip install .``). Everything goes into
    ``python``, the interpreter lkeval runs the agent on. Pure: it looks at files only.
    """
    if spec == INSTALL_NONE:
        return InstallPlan("install: none")
    if spec != INSTALL_AUTO:
        return InstallPlan("install command", (("sh", "-c", spec),))
    pip = (python, "-m", "pip", "install")
    lock = directory / "uv.lock"
    notice = None
    if lock.is_file():
        if uv:
            exported = str(scratch / "requirements.txt")
            return InstallPlan(
                "uv.lock",
                (
                    (uv, "export", "--frozen", "--no-hashes", "--no-dev", "--quiet",
                     "--output-file", exported),
                    (uv, "pip", "install", "--python", python, "--requirement", exported),
                ),
            )
        notice = "uv.lock found but uv is not installed: its locked versions are not used"
    if (directory / "requirements.txt").is_file():
        return InstallPlan("requirements.txt", ((*pip, "-r", "requirements.txt"),), notice)
    if (directory / "pyproject.toml").is_file():
        return InstallPlan("pyproject.toml", ((*pip, "."),), notice)
    return InstallPlan(
        "install: auto",
        notice=f"no uv.lock, requirements.txt or pyproject.toml in {directory}: installing "
        "nothing (set install: none to skip the search, or give an install command)",
    )


def run_install(
    plan: InstallPlan,
    env: Mapping[str, str],
    log: Callable[[str], None],
    relay: SignalRelay | None = None,
) -> None:
    """Run the install commands in the current directory; :class:`InstallError` on failure,
    :class:`Interrupted` when a signal stopped them."""
    if plan.notice:
        log(workflow_command("notice", plan.notice))
    if not plan.commands:
        return
    relay = relay or SignalRelay()
    log(workflow_command("group", f"lk-eval: install the agent's dependencies ({plan.what})"))
    try:
        for command in plan.commands:
            log("$ " + shlex.join(command))
            try:
                # its own process group, so a signal stops `sh -c` and all it started
                code = relay.run(command, env, group=True, stdin=subprocess.DEVNULL)
            except OSError as exc:
                raise InstallError(
                    f"{plan.what}: cannot run {command[0]}: {exc.strerror}"
                ) from None
            if relay.received:
                raise Interrupted(relay.received[0])
            if code != 0:
                raise InstallError(
                    f"installing the agent's dependencies ({plan.what}) failed: "
                    f"`{shlex.join(command)}` exited with code {code}"
                )
    finally:
        log("::endgroup::")


# --- running lkeval ----------------------------------------------------------------------------


class SignalRelay:
    """Passes SIGINT/SIGTERM/SIGHUP on to the running child and remembers them.

    As PID 1 in a container we would otherwise ignore them. The handler only records and
    forwards (it never raises), so a signal that lands while a child is being spawned cannot
    leave that child orphaned: it is forwarded as soon as the child exists.
    """

    def __init__(self) -> None:
        self.received: list[int] = []
        self._child: subprocess.Popen[bytes] | None = None
        self._group = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> SignalRelay:
        self._previous = {sig: signal.signal(sig, self._forward) for sig in FORWARDED_SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _forward(self, signum: int, _frame: object) -> None:
        self.received.append(signum)
        self._send(signum)

    def _send(self, signum: int) -> None:
        child = self._child
        if child is None:
            return
        with contextlib.suppress(ProcessLookupError):  # gone: its exit status is on its way
            if self._group:
                os.killpg(child.pid, signum)
            else:
                os.kill(child.pid, signum)

    def run(
        self, argv: Sequence[str], env: Mapping[str, str], *, group: bool, stdin: Any = None
    ) -> int:
        """Run ``argv`` in its own session; returns its exit code (128 + N if killed by N).

        With ``group`` signals go to its whole process group, else to the child alone.
        """
        if self.received:  # a signal before the start: do not start at all
            return 128 + self.received[0]
        self._group = group
        self._child = subprocess.Popen(
            list(argv), env=dict(env), start_new_session=True, stdin=stdin
        )
        try:
            for signum in self.received:  # arrived while the child was being spawned
                self._send(signum)
            code = wait_for(self._child.pid, reap_all=os.getpid() == 1)
            self._child.returncode = code  # reaped by us; keeps Popen from waiting or warning
            return code
        finally:
            self._child = None


def run_lkeval(argv: Sequence[str], env: Mapping[str, str], relay: SignalRelay) -> int:
    """Run ``python -m lkeval argv`` as a child, pass signals on, and return its exit code.

    The child gets its own session so a terminal's Ctrl+C reaches it once, through us, rather
    than twice (lkeval reads a second signal as "stop waiting, kill everything").
    """
    return relay.run([sys.executable, "-m", "lkeval", *argv], env, group=False)


def wait_for(pid: int, *, reap_all: bool) -> int:
    """Wait for ``pid``; as PID 1 also reap any orphan that exits meanwhile (no zombies).

    Returns the exit code, or 128 + N for a child killed by signal N (the shell's convention).
    """
    while True:
        try:
            reaped, status = os.waitpid(-1 if reap_all else pid, 0)
        except ChildProcessError:
            return EXIT_INTERNAL  # someone else reaped it; nothing sensible to report
        if reaped == pid:
            code = os.waitstatus_to_exitcode(status)
            return 128 - code if code < 0 else code


# --- the two ways in -----------------------------------------------------------------------------


def escape(message: str) -> str:
    """Escape a workflow command's message (``%``, CR, LF), as the runner expects."""
    return message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def workflow_command(name: str, message: str) -> str:
    """``::name::message``: ``::error::...`` shows as an annotation, ``::group::`` folds."""
    return f"::{name}::{escape(message)}"


def action_environment(environ: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of lkeval and the install: without ``INPUT_*``, plus ``extra``.

    The inputs are consumed here; dropping them keeps the token input away from the agent
    under test, which inherits lkeval's environment.
    """
    env = {k: v for k, v in environ.items() if not k.startswith("INPUT_")}
    env.update(extra)
    return env


def log(line: str) -> None:
    """One line to stdout, flushed before any child writes its own."""
    print(line, flush=True)


def run_action(environ: Mapping[str, str]) -> int:
    """The GitHub Action: inputs → working directory → install → ``lkeval run`` or ``report``."""
    with SignalRelay() as relay:
        return _run_action(environ, relay)


def _run_action(environ: Mapping[str, str], relay: SignalRelay) -> int:
    try:
        plan = build_plan(environ)
        directory = Path(plan.working_directory)
        if not directory.is_dir():
            raise InputError(
                f"input 'working-directory': {plan.working_directory} is not a directory "
                f"under {Path.cwd()}"
            )
        os.chdir(directory)
        env = action_environment(environ, plan.env)
        if plan.command == RUN:
            with tempfile.TemporaryDirectory(prefix="lkeval-install-") as tmp:
                install = install_plan(
                    plan.install,
                    Path.cwd(),
                    python=sys.executable,
                    uv=shutil.which("uv", path=env.get("PATH")),
                    scratch=Path(tmp),
                )
                run_install(install, action_environment(environ, {}), log, relay)
    except (InputError, InstallError) as exc:
        log(workflow_command("error", f"lk-eval: {exc}"))
        return EXIT_USAGE
    except Interrupted as stop:
        log(f"lk-eval: interrupted by signal {stop.signum} while installing; nothing ran")
        return 128 + stop.signum
    log(f"lk-eval: {shlex.join(['lkeval', *plan.argv])}  (in {Path.cwd()})")
    return run_lkeval(plan.argv, env, relay)


class Interrupted(Exception):
    """A signal arrived before lkeval started (during the install)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


USAGE = """\
lk-eval container: give lkeval's arguments, for example
  docker run --rm -v "$PWD:/src" -w /src -e OPENAI_API_KEY IMAGE \\
      run --agent agent.py --scenarios scenarios.yaml
or use it as the GitHub Action (inputs arrive as INPUT_* variables). `--help` lists commands."""


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Arguments → lkeval unchanged; none but ``INPUT_*`` variables → the Action; else usage."""
    args = list(sys.argv[1:] if argv is None else argv)
    env = os.environ if environ is None else environ
    if args:
        with SignalRelay() as relay:
            return run_lkeval(args, env, relay)
    if not any(name.startswith("INPUT_") for name in env):
        print(USAGE, file=sys.stderr)
        return EXIT_USAGE
    return run_action(env)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:  # the last boundary: a bug here must still say what happened
        log(workflow_command("error", f"lk-eval entrypoint: internal error: "
                                      f"{type(exc).__name__}: {exc}"))
        sys.exit(EXIT_INTERNAL)
