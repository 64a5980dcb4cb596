"""A signal in ``lkeval run``'s first second (issue 30.6): while lk-eval imports its command
line, starts its fork server, parses its flags and loads its scenarios.

SIGTERM's default once killed a run there with nothing written, and a Ctrl-C raised in the
middle of an import. From the first line of ``lkeval`` the signals are held for the run
(lkeval/startup.py), which ends 130/143 with every scenario "not run (interrupted)", the results
file, JUnit and the gate line, and no traceback. Each case waits for the moment lk-eval has its
handler in place (read from /proc, no timing) and signals it that many seconds later, warm and
cold: 0 s is lk-eval's first line, 2 s is well into the fork server's preload or the agents'
boot (the agent is held at its import, so nothing can finish). Before that first line is the
interpreter's own start, which no program can act in (docs/warm-starts.md).

And one phase held open, as tests/held_run.py holds the others: lk-eval stopped in the import
of its command line (an import hook the test puts on ``PYTHONPATH`` waits there until the test
has signalled it), so the signal lands mid-import every time.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from conftest import TEST_AGENTS, alive, clean_env, lkeval_process, run_argv

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

DELAYS = (0.0, 0.1, 0.3, 0.6, 1.0, 2.0)
CASES = [
    (delay, start, (signal.SIGINT, signal.SIGTERM)[i % 2])
    for i, delay in enumerate(DELAYS)
    for start in ("warm", "cold")
]


def _catches_sigterm(pid: int) -> bool:
    """Whether the process has a handler for SIGTERM (its ``SigCgt`` mask)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


def _scenarios(tmp_path: Path) -> Path:
    turn = {"user": "hello", "expect": [{"message": {}}]}
    scenarios = [{"id": f"s{i}", "label": f"First {i}", "turns": [turn]} for i in (1, 2)]
    path = tmp_path / "first.yaml"
    path.write_text(yaml.safe_dump({"name": "First", "scenarios": scenarios}))
    return path


#: Waits in the import of lk-eval's command line, with its pid in $IMPORT_MARK, until
#: $IMPORT_GO exists (only in lk-eval's own process: nothing else imports lkeval.cli).
_HELD_IMPORT = """
import os, sys, time

class _Hold:
    def find_spec(self, name, path=None, target=None):
        if name == "lkeval.cli" and os.environ.get("IMPORT_MARK"):
            with open(os.environ["IMPORT_MARK"], "w") as fh:
                fh.write(str(os.getpid()))
            while not os.path.exists(os.environ["IMPORT_GO"]):
                time.sleep(0.02)
        return None

sys.meta_path.insert(0, _Hold())
"""


def _run_and_signal(
    tmp_path: Path, argv: list[str], env: dict[str, str], how: signal.Signals, ready: Any
) -> tuple[int, str, str, set[int]]:
    """Start lk-eval, wait for ``ready(cli)``, signal it; (exit, stdout, stderr, its
    children when signalled)."""
    with lkeval_process(argv, env) as cli:
        deadline = time.monotonic() + 60
        while not ready(cli):
            assert cli.poll() is None, cli.communicate()
            assert time.monotonic() < deadline, "lk-eval never got there"
        started = {p.pid for p in psutil.Process(cli.pid).children(recursive=True)}
        cli.send_signal(how)
        if "IMPORT_GO" in env:
            Path(env["IMPORT_GO"]).write_text("go")
        out, err = cli.communicate(timeout=120)
    return cli.returncode, out, err, started


def _assert_not_run(tmp_path: Path, code: int, out: str, err: str, how: signal.Signals) -> None:
    assert code == 128 + how, out + err
    assert "Traceback" not in out + err, out + err
    assert err.strip() == f"lk-eval: interrupted by {how.name}; partial results written", err
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["metadata"]["interrupted"] is True
    reasons = [s["reason"] for s in data["scenarios"]]
    assert reasons == ["not run (interrupted)"] * 2, data["scenarios"]
    assert (tmp_path / "out" / "junit.xml").read_text().count("<testcase") == 2
    assert "lk-eval gate: " in out and "not run (interrupted)" in out, out  # the gate line
    assert list((tmp_path / "tmp").iterdir()) == [], "temp files left behind"


def _argv_env(tmp_path: Path, start: str, **extra: str) -> tuple[list[str], dict[str, str]]:
    (tmp_path / "tmp").mkdir()
    results = tmp_path / "out" / "results.json"
    argv = [*run_argv(TEST_AGENTS / "held_agent.py", _scenarios(tmp_path), results)]
    argv += ["--junit", str(tmp_path / "out" / "junit.xml")]
    argv += ["--cold-start"] if start == "cold" else []
    mark = str(tmp_path / "held.mark")
    env = clean_env(
        OPENAI_API_KEY="k", TMPDIR=str(tmp_path / "tmp"), HOLD_AT="boot", HOLD_MARK=mark, **extra
    )
    return argv, env


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
@pytest.mark.parametrize("start", ["warm", "cold"])
def test_a_signal_while_lkeval_imports_its_command_line_writes_every_scenario_not_run(
    tmp_path: Path, start: str, how: signal.Signals
) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_HELD_IMPORT)
    mark, go = tmp_path / "import.mark", tmp_path / "import.go"
    argv, env = _argv_env(
        tmp_path, start, PYTHONPATH=str(hook), IMPORT_MARK=str(mark), IMPORT_GO=str(go)
    )
    code, out, err, started = _run_and_signal(
        tmp_path, argv, env, how, lambda cli: mark.exists() and mark.read_text() == str(cli.pid)
    )
    _assert_not_run(tmp_path, code, out, err, how)
    assert not alive(started), "still alive when lk-eval had exited"


@pytest.mark.parametrize(
    ("delay", "start", "how"), CASES, ids=[f"{d}s-{s}-{h.name}" for d, s, h in CASES]
)
def test_a_signal_in_the_first_second_writes_every_scenario_not_run(
    tmp_path: Path, delay: float, start: str, how: signal.Signals
) -> None:
    argv, env = _argv_env(tmp_path, start)

    def ready(cli: Any) -> bool:
        if not _catches_sigterm(cli.pid):  # lk-eval's first line has run
            return False
        time.sleep(delay)
        return True

    code, out, err, started = _run_and_signal(tmp_path, argv, env, how, ready)
    _assert_not_run(tmp_path, code, out, err, how)
    assert not alive(started), "still alive when lk-eval had exited"


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_signal_while_the_agents_interpreter_is_probed_writes_every_scenario_not_run(
    tmp_path: Path, how: signal.Signals
) -> None:
    """The ``--python`` probe runs an interpreter (0.1-1 s, more under load): a signal there
    once found no scenarios loaded and wrote nothing. Held open here by an interpreter that
    waits until the test has signalled."""
    mark, go = tmp_path / "probe.mark", tmp_path / "probe.go"
    python = tmp_path / "python"
    python.write_text(
        "#!/bin/sh\n"  # only the probe waits (the fork server runs this interpreter too)
        f'case "$*" in *find_spec*) echo $$ > {mark}\n'
        f"  while [ ! -e {go} ]; do sleep 0.02; done;;\nesac\n"
        f'exec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    argv, env = _argv_env(tmp_path, "warm", IMPORT_GO=str(go))
    argv += ["--python", str(python)]
    code, out, err, started = _run_and_signal(tmp_path, argv, env, how, lambda cli: mark.exists())
    _assert_not_run(tmp_path, code, out, err, how)
    assert not alive(started), "still alive when lk-eval had exited"
