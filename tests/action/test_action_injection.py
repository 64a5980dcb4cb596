"""No Action input can start a workflow command (issue 30.5).

A workflow may hand an input text its author does not control (``title: ${{
github.event.pull_request.title }}``). Every input of action.yml, in turn, is set to a value
carrying each line break the runner or a log viewer could split at (LF, CR, U+2028, U+2029),
a ``%0A`` the runner decodes inside a command, and the old ``##[`` form; the entrypoint then
runs exactly as the runner runs the container, with the real lkeval behind it, and no line
of the log may be a command the value put there. The entrypoint once echoed lkeval's command
line with the value's LF in it, so ``title: "a\\n::error::x"`` made an annotation.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from action_runner import container_step
from conftest import clean_env
from report_fixtures import run_results, write_results
from test_action_runner import TOKEN, action, run_container

from lkeval_action.inputs import INPUTS_BY_NAME, REPORT, RUN

#: Each marker a line of the log must never start with (``##[`` anywhere).
HOSTILE = (
    "v\n::error::x1\r::warning::x2\u2028::notice::x3%0A::error::x4\u2029##[error]x5"
    "\x85::debug::x6\x0b::group::x7"
)
INJECTED = re.compile(r"::(error|warning|notice|debug|group)::x\d|##\[error\]x5")
#: Every place a line can end: what the runner splits at (CR, LF) and what a reader may.
LINE_BREAK = re.compile("\r\n|[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
SCENARIOS = """\
scenarios:
  - label: Books a room
    instructions: Book a double room.
    agent_expectations: The agent books a double room.
"""


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _inputs(name: str, workspace: Path) -> dict[str, str]:
    """A step that gets as far as it can with ``name`` set to :data:`HOSTILE`: ``report`` on
    a results file for the inputs it takes (it boots nothing), else ``run`` against a judge
    that refuses connections (the run names its models, then stops before any agent)."""
    spec = INPUTS_BY_NAME[name]
    value = HOSTILE
    if name == "install":  # the user's own shell line: one that runs, quoting the value
        value = "printf '' '" + HOSTILE + "'"
    if name in ("baseline", "cassettes-from"):  # a branch: the download is looked for
        value = "github:" + HOSTILE
    if REPORT in spec.commands:
        return {"command": "report", "results": "results.json", name: value}
    unreachable = f"http://127.0.0.1:{_closed_port()}/v1"
    run = {
        "command": RUN,
        "install": "none",
        "agent": "agent.py",
        "scenarios": "scenarios.yaml",
        "caller-model": "caller",
        "judge-model": "judge",
        "caller-base-url": unreachable,
        "judge-base-url": unreachable,
        "extra-args": "--cold-start --llm-timeout 5",
        "cassettes": "tapes",  # so that cassettes-from restores into it
    }
    return {**run, name: value}


def injected_lines(output: str) -> list[str]:
    """The lines of ``output`` the hostile value made into a command.

    An ``::add-mask::`` line (the runner splits at CR and LF only) is the one exception: its
    value must be the secret exactly, and the runner never shows it."""
    runner_lines = re.split(r"\r\n|\r|\n", output)
    shown = [line for line in runner_lines if not line.lstrip().startswith("::add-mask::")]
    return [
        line
        for line in LINE_BREAK.split("\n".join(shown))
        if INJECTED.match(line.lstrip()) or "##[error]x5" in line
    ]


@pytest.mark.parametrize("name", list(action()["inputs"]))
def test_no_input_can_start_a_workflow_command(tmp_path: Path, name: str) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "agent.py").write_text("raise SystemExit('not an agent')\n")
    (workspace / "scenarios.yaml").write_text(SCENARIOS)
    write_results(run_results(), workspace / "results.json")
    step = container_step(action(), _inputs(name, workspace), token=TOKEN)
    env = clean_env(
        GITHUB_ACTIONS="true",
        GITHUB_WORKSPACE=str(workspace),
        GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"),
        GITHUB_OUTPUT=str(tmp_path / "output.txt"),
        HOME=str(tmp_path / "home"),
        OPENAI_API_KEY="sk-test-not-a-key",
        **step.env,
    )
    proc = run_container(step.argv, env, workspace, timeout=180)
    log = proc.stdout + proc.stderr
    assert "Traceback" not in log and proc.returncode != 4, log
    assert injected_lines(log) == [], log
    assert "x1" in log or name in ("github-token", "install", "working-directory"), (
        "the value never reached the log: the test proves nothing for this input\n" + log
    )


def test_the_check_sees_an_injection() -> None:
    """The check itself: a raw value in a line is caught, an escaped one is not."""
    assert injected_lines(f"lk-eval: lkeval --title '{HOSTILE}'") != []
    assert injected_lines("::error::lk-eval: input `pr`: 'v%0A::error::x1\\u2028'") == []
