"""The lk-eval container's entrypoint: GitHub Action inputs, or plain lkeval arguments.

Two ways in:

* With arguments (``docker run IMAGE run --agent agent.py ...``), they go to ``python -m lkeval``
  unchanged: the container is then just lkeval with its dependencies.
* Without arguments, as the GitHub Action. action.yml declares ``runs.args: []``, so the runner
  never passes any (without it, the runner would pass an input named ``args`` as the command
  line). Every input arrives as ``INPUT_<NAME>``; ``lkeval_action.inputs`` checks them and
  maps them to lkeval's argv. The entrypoint then changes into ``working-directory``,
  installs the agent's own dependencies into this Python (built outside the checkout), runs
  lkeval, and finally hands what it wrote in the workspace back to the runner's user.

Inputs become argv items here and never pass through a shell, except ``install`` when it is a
command, which is the user's own line run with ``sh -c`` and has nothing else put into it. The
GitHub token goes to lkeval as ``GITHUB_TOKEN`` in its environment, never on its command line,
which a results file records and ``ps`` shows.

Standard library only (with ``lkeval_action/`` beside it), plus ``lkeval.text``, lkeval's
text safety, which is itself standard library only and installed in the image before the
agent's dependencies are: the entrypoint masks with lkeval's own masker, so the two cannot
disagree about a secret. It is tested by running it exactly as the runner runs the container.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from lkeval.text.masking import redact_argv
from lkeval.text.untrusted import one_line, shown_command
from lkeval_action.commands import log, workflow_command
from lkeval_action.inputs import (
    INPUT_OF_FLAG,
    INPUTS,
    RUN,
    InputError,
    Plan,
    build_plan,
)
from lkeval_action.install import (
    InstallError,
    cache_environment,
    copy_checkout,
    install_plan,
    run_install,
)
from lkeval_action.processes import (
    EXIT_INTERNAL,
    Interrupted,
    SignalRelay,
    run_lkeval,
    wait_for,
)
from lkeval_action.secrets import Announcer
from lkeval_action.workspace import hand_back, report_paths

__all__ = [
    "EXIT_INTERNAL",
    "EXIT_USAGE",
    "INPUTS",
    "InputError",
    "InstallError",
    "action_environment",
    "build_plan",
    "install_plan",
    "main",
    "run_install",
    "wait_for",
]

EXIT_USAGE = 2
#: lkeval reads this (lkeval.publish.github.action_inputs) to name the input, not the option,
#: in its usage errors.
INPUT_NAMES_VARIABLE = "LKEVAL_INPUT_NAMES"


def action_environment(environ: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of lkeval and the install: without ``INPUT_*``, plus ``extra``.

    The inputs are consumed here; dropping them keeps the token input away from the agent
    under test, which inherits lkeval's environment. ``.pyc`` files are not written: the
    agent's would land in the runner user's checkout, owned by root.
    """
    env = {k: v for k, v in environ.items() if not k.startswith("INPUT_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def run_action(environ: Mapping[str, str]) -> int:
    """The GitHub Action: inputs → working directory → install → ``lkeval run`` or ``report``,
    then the workspace handed back to its owner whatever happened."""
    workspace = Path(environ.get("GITHUB_WORKSPACE") or Path.cwd())
    plan: Plan | None = None
    announcer = Announcer()
    with SignalRelay() as relay, tempfile.TemporaryDirectory(prefix="lkeval-") as scratch:
        try:
            try:
                plan = build_plan(environ)
            finally:  # before anything else is printed, the input error included
                announcer.announce(environ, plan.argv if plan else ())
            return _run(plan, environ, workspace, Path(scratch), relay)
        except (InputError, InstallError) as exc:
            log(workflow_command("error", f"lk-eval: {exc}"))
            return EXIT_USAGE
        except Interrupted as stop:
            log(f"lk-eval: interrupted by signal {stop.signum} while installing; nothing ran")
            return 128 + stop.signum
        finally:
            give_back(workspace, plan, environ.get("HOME"))


def give_back(workspace: Path, plan: Plan | None, home: str | None = None) -> None:
    """Hand the workspace back (see ``lkeval_action.workspace``), and ``$HOME`` too: in a
    Docker action it is the runner's ``/github/home``, which outlives the step, and whatever the
    agent or its libraries cached there must not stay root's. A failure is a warning, never a
    change of the gate's exit code."""
    reports = report_paths(map(Path, plan.outputs), Path.cwd()) if plan else set()
    places = [("the workspace", workspace, reports)]
    if home and Path(home).is_dir():
        places.append(("$HOME", Path(home), set()))
    for name, root, readable in places:
        try:
            hand_back(root, readable)
        except OSError as exc:
            log(
                workflow_command(
                    "warning", f"lk-eval: could not hand {name} back to its owner: {exc}"
                )
            )


def _run(
    plan: Plan, environ: Mapping[str, str], workspace: Path, scratch: Path, relay: SignalRelay
) -> int:
    directory = Path(plan.working_directory)
    if not directory.is_dir():
        raise InputError(
            "working-directory", f"{plan.working_directory} is not a directory under {Path.cwd()}"
        )
    os.chdir(directory)
    env = action_environment(environ, {**plan.env, INPUT_NAMES_VARIABLE: json.dumps(INPUT_OF_FLAG)})
    if plan.command == RUN:
        install = install_plan(
            plan.install,
            Path.cwd(),
            python=sys.executable,
            uv=shutil.which("uv", path=env.get("PATH")),
        )
        where = None
        if install.in_copy and install.commands:
            where = copy_checkout(Path.cwd(), workspace, scratch)
        caches = cache_environment(scratch)
        run_install(install, action_environment(environ, caches), log, relay, cwd=where)
    shown = redact_argv(plan.argv)  # its secrets were announced before the first line
    # one line whatever the inputs hold: a title or a path with a line break in it could
    # otherwise start a workflow command of its own
    log(f"lk-eval: {shown_command(['lkeval', *shown])}  (in {one_line(str(Path.cwd()))})")
    return run_lkeval(plan.argv, env, relay)


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
        log(
            workflow_command(
                "error", f"lk-eval entrypoint: internal error: {type(exc).__name__}: {exc}"
            )
        )
        sys.exit(EXIT_INTERNAL)
