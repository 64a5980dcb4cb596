"""Benchmark: where a replayed ``lkeval run``'s wall time goes, phase by phase.

Records the ``bench/replay.py`` suite once (live, ``--concurrency 4``), then runs it replayed
(``auto``, nothing changed) at each ``--concurrency`` given, with lk-eval's own methods wrapped
to stamp when each phase begins and ends (a bench-only wrapper around ``python -m lkeval``: the
product is not changed). Prints the run's phases (interpreter up, imports, fork server ready,
engine, results written, exit) and, per phase of an attempt (prepare, wait for a conversation
slot, connect, greeting, turns, finalize, stop), the median and the sum over the attempts.

With ``--profile``, also profiles each replayed run's processes (cProfile on each thread's CPU
clock): lk-eval's own, and every agent the fork server forks, all its threads (a
``sitecustomize`` on the fork server's ``PYTHONPATH`` starts a profiler in each child and saves
it at the child's ``os._exit``); prints the functions that took the most CPU in each, per run
and per agent. A coroutine's inclusive time can hold what ran while it was suspended: read the
own times for where the CPU goes.

    python bench/replay_phases.py [--concurrency 1 4] [--scenarios 20] [--delay 1.0] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from _common import HOTEL_AGENT, ROOT, hotel_env, machine
from replay import rules, write_inputs

from lkeval.testing.llm_server import LLMServer

# Runs in the lk-eval process before ``lkeval.cli.entrypoint``: wraps methods to write
# (phase, key, begin|end, time) lines to $PHASES_OUT.
HOOKS = r"""
import os, sys, time, json, threading, functools, asyncio
_out = open(os.environ["PHASES_OUT"], "a", buffering=1)
_lock = threading.Lock()
def stamp(phase, key, edge, t=None):
    with _lock:
        _out.write(json.dumps([phase, key, edge, t if t is not None else time.time()]) + "\n")
stamp("interpreter", "", "end")
_profile = None
if os.environ.get("PROFILE_OUT"):
    import cProfile
    _profile = cProfile.Profile(time.thread_time)
    _profile.enable()
import lkeval.cli
from lkeval.agents import process as P, launch as L
from lkeval.run import conversation as C, attempt as A, suite as S, engine as E
from lkeval.replay import session as R
from lkeval import cli as CLI
stamp("imports", "", "end")

def wrap(cls, name, phase, key=lambda self, *a: ""):
    original = getattr(cls, name)
    if asyncio.iscoroutinefunction(original):
        @functools.wraps(original)
        async def w(self, *a, **k):
            kk = key(self, *a)
            stamp(phase, kk, "begin")
            try:
                return await original(self, *a, **k)
            finally:
                stamp(phase, kk, "end")
    else:
        @functools.wraps(original)
        def w(self, *a, **k):
            kk = key(self, *a)
            stamp(phase, kk, "begin")
            try:
                return original(self, *a, **k)
            finally:
                stamp(phase, kk, "end")
    setattr(cls, name, w)

agent_key = lambda self, *a: self.log_path.stem
conv_key = lambda self, *a: self.agent.log_path.stem
wrap(L.StartingLauncher, "result", "launcher ready")
wrap(S.Suite, "_preflight", "judge preflight")
wrap(S.Suite, "_write_and_finish", "results and reports")
wrap(E.Engine, "run", "engine")
wrap(A.ScenarioAttempt, "run", "attempt", lambda self, *a: self.log_path.stem)
wrap(P.AgentProcess, "prepare", "prepare", agent_key)
wrap(P.AgentProcess, "connect", "connect", agent_key)
wrap(P.AgentProcess, "stop", "stop", agent_key)
_tick = os.sysconf("SC_CLK_TCK")
def cpu_of(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            f = fh.read().rsplit(b")", 1)[1].split()
        return (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / _tick
    except (OSError, ValueError, IndexError):
        return None
_stop = P.AgentProcess.stop
async def stop(self, *a, **k):
    if self.proc is not None:
        cpu = cpu_of(self.proc.pid)
        if cpu is not None:
            stamp("agent cpu", self.log_path.stem, "value", cpu)
    return await _stop(self, *a, **k)
P.AgentProcess.stop = stop
wrap(C.Conversation, "wait_for_greeting", "greeting", conv_key)
wrap(C.Conversation, "turn", "turns", conv_key)
wrap(C.Conversation, "finalize", "finalize", conv_key)
wrap(C.Conversation, "usage", "usage", conv_key)
wrap(R.AttemptTapes, "agent_env", "tape handed", lambda self, *a: self._stem)
wrap(R.AttemptTapes, "finish", "tape finish", lambda self, *a: self._stem)
_leave = CLI.leave
def leave(code):
    stamp("exit", "", "begin")
    stamp("lkeval cpu", "", "value", time.process_time())
    _out.flush()
    if _profile is not None:
        _profile.disable()
        _profile.dump_stats(os.environ["PROFILE_OUT"])
    _leave(code)
CLI.leave = leave
sys.argv = ["lkeval", *sys.argv[1:]]
lkeval.cli.entrypoint()
"""


# On the fork server's PYTHONPATH (bench-only): each forked agent profiles itself, every thread
# (the console runs the job in one of its own), on the CPU clock, from the fork to its
# ``os._exit`` (agents leave through ``tree.fast_exit``).
AGENT_PROFILER = r"""
import os, sys
if sys.argv and sys.argv[0].endswith("fork_server.py") and os.environ.get("AGENT_PROFILE_DIR"):
    import cProfile, threading, time
    _profiles = []
    def _thread_profile(*_):  # a thread's first event: profile it from here (the job thread)
        profile = cProfile.Profile(time.thread_time)
        _profiles.append(profile)
        profile.enable()
    def _start():
        _profiles.clear()
        _thread_profile()
        threading.setprofile(_thread_profile)
    os.register_at_fork(after_in_child=_start)
    _exit = os._exit
    def _profiled_exit(code):
        for n, profile in enumerate(list(_profiles)):
            profile.disable()
            name = f"{os.getpid()}-{n}.prof"
            profile.dump_stats(os.path.join(os.environ["AGENT_PROFILE_DIR"], name))
        _exit(code)
    os._exit = _profiled_exit
"""


def profiling_env(work: Path, tag: str) -> tuple[dict[str, str], tuple[Path, Path]]:
    """The environment additions that profile lk-eval's process and each agent; (env,
    (lk-eval's profile file, the agents' profile directory))."""
    site = work / "profiler"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(AGENT_PROFILER)
    agents = work / f"agent-profiles-{tag}"
    agents.mkdir(exist_ok=True)
    lkeval = work / f"lkeval-{tag}.prof"
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    env = {"PYTHONPATH": path, "AGENT_PROFILE_DIR": str(agents), "PROFILE_OUT": str(lkeval)}
    return env, (lkeval, agents)


# Frames whose inclusive time is the event loop's (its ``poll`` holds, on the CPU clock, what
# other threads spent meanwhile) or the import machinery's: left out of the inclusive list.
_PLUMBING = ("asyncio/", "selectors.py", "threading.py", "<frozen", "contextvars", "runners.py")


def print_profile(title: str, files: list[Path], top: int = 15) -> None:
    """The functions with the most CPU per process: inclusive (without the event loop's and
    the import machinery's frames), then their own."""
    import io
    import pstats

    if not files:
        print(f"  {title}: no profile written")
        return
    stats = pstats.Stats(*map(str, files), stream=io.StringIO())
    n = len({f.name.split("-")[0] for f in files})  # processes (a file per thread)
    inclusive, own = [], []
    for (path, line, name), (_, calls, tt, cum, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{Path(path).name}:{line}({name})" if line else name
        if "poll" in name:
            continue
        own.append((tt / n, calls / n, where))
        if line and not any(p in path for p in _PLUMBING):
            inclusive.append((cum / n, calls / n, where))
    print(f"  {title}: {n} process(es), CPU seconds per process")
    for label, rows in (("inclusive", inclusive), ("own", own)):
        print(f"    {label}:")
        for seconds, calls, where in sorted(rows, reverse=True)[:top]:
            print(f"      {seconds:7.3f}s {calls:8.1f} calls  {where}")


def timed_run(
    suite: Path, cassettes: Path, mode: str, env: dict[str, str], work: Path, c: int, tag: str
) -> tuple[float, list[list[Any]]]:
    """One ``lkeval run`` with the hooks; (wall, stamps relative to the spawn)."""
    phases = work / f"phases-{tag}.jsonl"
    phases.unlink(missing_ok=True)
    args = [
        "run", "--agent", str(HOTEL_AGENT), "--scenarios", str(suite),
        "--results", str(work / tag / "results.json"), "--concurrency", str(c),
        "--comment", "off", "--no-github", "--repeat", "1", "--cassettes", str(cassettes),
        "--cassette-mode", mode,
    ]  # fmt: skip
    spawned = time.time()
    proc = subprocess.run(
        [sys.executable, "-c", HOOKS, *args],
        env={**env, "PHASES_OUT": str(phases)},
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    wall = time.time() - spawned
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"lkeval run failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    stamps = [json.loads(line) for line in phases.read_text().splitlines()]
    for s in stamps:
        if s[2] != "value":
            s[3] -= spawned
    return wall, stamps


def report(wall: float, stamps: list[list[Any]]) -> None:
    """The run's timeline, then each attempt phase's median and sum."""
    begins: dict[tuple[str, str], float] = {}
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    values: dict[str, list[float]] = defaultdict(list)
    for phase, key, edge, t in stamps:
        if edge == "value":
            values[phase].append(t)
        elif edge == "begin":
            begins[(phase, key)] = t
        elif (phase, key) in begins:
            spans[phase].append((begins.pop((phase, key)), t))
        else:
            spans[phase].append((t, t))
    print(f"  wall {wall:6.2f}s (spawn to exit of `lkeval run`)")
    for phase in ("interpreter", "imports", "judge preflight", "launcher ready", "engine"):
        for begin, end in spans.get(phase, []):
            print(f"    {phase:18s} {begin:6.2f}s -> {end:6.2f}s ({end - begin:5.2f}s)")
    for phase in ("results and reports", "exit"):
        for begin, end in spans.get(phase, []):
            print(f"    {phase:18s} {begin:6.2f}s -> {end:6.2f}s ({end - begin:5.2f}s)")
    attempts = spans.get("attempt", [])
    if attempts:
        first = min(b for b, _ in attempts)
        last = max(e for _, e in attempts)
        print(f"    attempts           first begins {first:6.2f}s, last ends {last:6.2f}s")
    for name, got in sorted(values.items()):
        print(f"    {name:18s} median {statistics.median(got):6.3f}s sum {sum(got):6.2f}s")
    slot_waits = _slot_waits(stamps)
    print("    per attempt:          median     sum    n")
    rows = ["prepare", "slot wait", "connect", "greeting", "turns", "finalize", "usage", "stop",
            "tape handed", "tape finish", "attempt"]  # fmt: skip
    for phase in rows:
        durations = slot_waits if phase == "slot wait" else [e - b for b, e in spans[phase]]
        if durations:
            print(
                f"      {phase:16s} {statistics.median(durations):7.3f}s "
                f"{sum(durations):7.2f}s {len(durations):4d}"
            )


def _slot_waits(stamps: list[list[Any]]) -> list[float]:
    """Per agent: from the end of ``prepare`` to the begin of ``connect``."""
    prepared: dict[str, float] = {}
    waits = []
    for phase, key, edge, t in stamps:
        if phase == "prepare" and edge == "end":
            prepared[key] = t
        elif phase == "connect" and edge == "begin" and key in prepared:
            waits.append(t - prepared.pop(key))
    return waits


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--scenarios", type=int, default=20)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=1, help="replayed runs per concurrency")
    parser.add_argument(
        "--profile", action="store_true", help="profile lk-eval and each agent (replayed runs)"
    )
    args = parser.parse_args()
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        suite = write_inputs(work, args.scenarios, args.delay)
        cassettes = work / "cassettes"
        with LLMServer.from_file(rules(work, args.delay)) as llm:
            env = {**os.environ, **hotel_env(llm.base_url)}
            env.pop("GITHUB_ACTIONS", None)
            wall, _ = timed_run(suite, cassettes, "record", env, work, 4, "record")
            print(f"record (live, c=4): {wall:.2f}s, {len(llm.requests)} LLM calls")
            for n in range(args.repeat):
                for c in args.concurrency:
                    before = len(llm.requests)
                    tag = f"c{c}-{n}"
                    extra, profiles = profiling_env(work, tag) if args.profile else ({}, None)
                    run_env = {**env, **extra}
                    wall, stamps = timed_run(suite, cassettes, "auto", run_env, work, c, tag)
                    calls = len(llm.requests) - before
                    print(f"\nreplayed (auto), --concurrency {c}: {calls} LLM calls, "
                          f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
                    report(wall, stamps)
                    if profiles is not None:
                        lkeval, agents = profiles
                        print_profile("lk-eval's process", [lkeval] if lkeval.is_file() else [])
                        print_profile("agents", sorted(agents.glob("*.prof")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
