"""Benchmark: the fixed CPU one scenario costs, by process and by phase (issue 20.1).

Runs benchmark (c)'s suite (20 scripted scenarios x 3 turns, every LLM answer after 200 ms)
inside one real ``lkeval run`` in this process, and reads each agent's CPU (utime + stime from
``/proc/PID/stat``) at the edges of its phases, seen from lk-eval's side: ``prepare`` (spawn ->
prepared: the fork, the child's set-up, the agent's import, its server, the job, the entrypoint
up to ``AgentSession.start``), ``wait`` (prepared -> go), ``connect`` (go -> the console dialled
in: the session's start), the greeting, the turns, ``finalize`` (the verdict asked), and
``exit`` (stop -> gone: SIGTERM, the server's close, the host's exit; from a sampler every
20 ms, so short of at most 20 ms). Also per scenario: the fork server's CPU (each fork), and
lk-eval's own process (its CPU from the first spawn to the end, divided by the scenarios).
CPU-seconds stretch less with the machine's load than wall seconds do (not nothing: at load
20-30 the same code's totals moved by +-15% from run to run, so compare alternating rounds).

    python bench/scenario_cpu.py [--concurrency 1] [--scenarios 20] [--compare /tmp/old-tree]
                                 [--rounds 1] [--marks] [--steps] [--profile-agents DIR]
                                 [--profile-lkeval FILE]

``--marks`` also notes, inside each agent, its CPU at the steps of its life (the fork, the
host's set-up, the user's module, the server, the job, the entrypoint, prepared, go, the
session's start, the shutdown, the exit) and prints the mean CPU between each step and the next.
``--steps`` measures only lk-eval's own per-scenario steps (the process tree walk, the agent's
working directory), each alone and repeated, in each tree.

``--compare DIR`` runs another checkout in alternation (each round: this tree, then that one),
each in a fresh interpreter with that tree's ``lkeval`` first on ``sys.path``.
``--profile-agents DIR`` writes each agent's cProfile (every thread, on its own CPU clock;
cProfile roughly triples the agent's CPU, so read shares, not seconds); ``--profile-lkeval
FILE`` writes where lk-eval's main thread spends its CPU from the first spawn on (stacks sampled
every 2 ms while it runs). The agents are measured inside through
``bench/agents/profiled_fork_server.py``, which runs lk-eval's fork server with the hooks.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK")
PROFILED_SERVER = Path(__file__).resolve().parent / "agents" / "profiled_fork_server.py"
PHASES = ("prepare", "wait", "connect", "greeting", "turns", "finalize", "exit")


def cpu_of(pid: int) -> float | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


class Marks:
    """Each agent's CPU at the end of each phase, and its last figure seen by a sampler."""

    def __init__(self) -> None:
        self.at: dict[str, dict[str, float]] = defaultdict(dict)
        self.pid: dict[str, int] = {}
        self.last: dict[str, float] = {}
        self.fork_server: int | None = None
        self.fork_server_first: float | None = None
        self.lkeval_first: float | None = None
        self.fork_server_last = 0.0
        self.own_cpu = 0.0  # the sampler thread's own CPU
        self.own_at_first = 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        threading.Thread(target=self._sample, daemon=True).start()

    def mark(self, name: str, phase: str) -> None:
        pid = self.pid.get(name)
        cpu = cpu_of(pid) if pid else None
        if cpu is not None:
            self.at[name][phase] = cpu
            with self._lock:
                self.last[name] = cpu

    def _sample(self) -> None:
        """Every 20 ms: each agent's CPU and the fork server's; this thread's own CPU is kept
        apart (it runs in lk-eval's process and is not lk-eval's)."""
        while not self._stop.wait(0.02):
            with self._lock:
                pids = dict(self.pid)
            for name, pid in pids.items():
                cpu = cpu_of(pid)
                if cpu is not None:
                    with self._lock:
                        self.last[name] = max(cpu, self.last.get(name, 0.0))
            if self.fork_server is not None:
                cpu = cpu_of(self.fork_server)
                if cpu is not None:
                    self.fork_server_last = cpu
            self.own_cpu = time.thread_time()

    def close(self) -> None:
        self._stop.set()


MARKS: Marks | None = None


def _wrap(cls: Any, method: str, name_of: Any, before: str | None, after: str | None) -> None:
    original = getattr(cls, method)

    @functools.wraps(original)
    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        assert MARKS is not None
        name = name_of(self)
        if before:
            MARKS.mark(name, before)
        try:
            return await original(self, *args, **kwargs)
        finally:
            if after:
                MARKS.mark(name, after)

    setattr(cls, method, wrapper)


def instrument(profile: str | None, agents_dir: str | None, marks_dir: str | None) -> None:
    from lkeval.agents import fork_client
    from lkeval.agents.process import AgentProcess

    if agents_dir or marks_dir:  # the fork server's children measured inside (bench/agents/)
        if agents_dir:
            os.environ["SCENARIO_CPU_PROFILE_DIR"] = agents_dir
        if marks_dir:
            os.environ["SCENARIO_CPU_MARKS_DIR"] = marks_dir
        os.environ["SCENARIO_CPU_FORK_SERVER"] = str(fork_client.SERVER_SCRIPT)
        fork_client.SERVER_SCRIPT = PROFILED_SERVER
    from lkeval.run.conversation import Conversation

    def of_agent(agent: Any) -> str:
        return str(agent.log_path.stem)

    def of_conv(conv: Any) -> str:
        return of_agent(conv.agent)

    original_spawn = AgentProcess._spawn

    @functools.wraps(original_spawn)
    async def spawn(self: Any, *args: Any, **kwargs: Any) -> Any:
        assert MARKS is not None
        if MARKS.lkeval_first is None:
            MARKS.lkeval_first = time.process_time()
            MARKS.own_at_first = MARKS.own_cpu
            if profile:
                _start_profile()
        proc = await original_spawn(self, *args, **kwargs)
        MARKS.pid[of_agent(self)] = proc.pid
        MARKS.at[of_agent(self)]["spawned"] = 0.0
        if MARKS.fork_server is None:
            MARKS.fork_server = _parent(proc.pid)
            MARKS.fork_server_first = cpu_of(MARKS.fork_server) or 0.0
        return proc

    AgentProcess._spawn = spawn  # type: ignore[method-assign]
    _wrap(AgentProcess, "prepare", of_agent, None, "prepare")
    _wrap(AgentProcess, "connect", of_agent, "wait", "connect")
    _wrap(Conversation, "wait_for_greeting", of_conv, None, "greeting")
    _wrap(Conversation, "turn", of_conv, None, "turns")
    _wrap(Conversation, "finalize", of_conv, None, "finalize")
    _wrap(AgentProcess, "stop", of_agent, "stop", None)


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rindex(b")") + 2 :].split()[1])


_PROFILE: Any = None


class StackSampler:
    """lk-eval's main thread sampled every 2 ms while it is runnable (state R in
    ``/proc/self/task/TID/stat``: on a CPU, or on a loaded machine waiting for one): a count
    per function, inclusive (every frame of the stack), with far less distortion than
    cProfile's per-call cost on Python-heavy code. Ignore the event loop's ``select``: there a
    thread is runnable only while it waits for a CPU after waking."""

    def __init__(self) -> None:
        self.main = threading.main_thread()
        self.tid = threading.get_native_id()
        self.inclusive: dict[str, int] = defaultdict(int)
        self.own: dict[str, int] = defaultdict(int)
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        stat_path = f"/proc/self/task/{self.tid}/stat"
        ident = self.main.ident
        assert ident is not None
        while not self._stop.wait(0.002):
            with open(stat_path, "rb") as fh:
                stat = fh.read()
            if stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] != b"R":
                continue
            frame = sys._current_frames().get(ident)
            if frame is None:
                continue
            self.samples += 1
            seen = set()
            first = True
            while frame is not None:
                code = frame.f_code
                name = f"{code.co_filename.split('site-packages/')[-1]}:{code.co_name}"
                if first:
                    self.own[name] += 1
                    first = False
                if name not in seen:
                    self.inclusive[name] += 1
                    seen.add(name)
                frame = frame.f_back

    def dump(self, path: str) -> None:
        self._stop.set()
        self._thread.join()
        with open(path, "w") as fh:
            fh.write(f"{self.samples} samples on CPU (2 ms each)\n\n-- inclusive --\n")
            for name, n in sorted(self.inclusive.items(), key=lambda kv: -kv[1])[:150]:
                fh.write(f"{n:6d} {name}\n")
            fh.write("\n-- own --\n")
            for name, n in sorted(self.own.items(), key=lambda kv: -kv[1])[:80]:
                fh.write(f"{n:6d} {name}\n")


def _start_profile() -> None:
    global _PROFILE
    _PROFILE = StackSampler()


def agent_marks(marks_dir: str) -> dict[str, float]:
    """Mean CPU-s from each step to the next (first occurrence of each), over all agents."""
    steps: dict[str, list[float]] = defaultdict(list)
    order: list[str] = []
    for path in Path(marks_dir).glob("agent-*.json"):
        seen: dict[str, float] = {}
        for name, cpu in json.loads(path.read_text()):
            seen.setdefault(name, cpu)
        ranked = sorted(seen.items(), key=lambda kv: kv[1])
        for (a, ca), (b, cb) in itertools.pairwise(ranked):
            steps[f"{a} -> {b}"].append(cb - ca)
            if f"{a} -> {b}" not in order:
                order.append(f"{a} -> {b}")
    n = max((len(v) for v in steps.values()), default=1)
    return {k: sum(steps[k]) / n for k in order}


def phase_cpu(marks: Marks) -> dict[str, list[float]]:
    """Per phase, each agent's CPU in it (the fork itself is in the fork server's figure)."""
    rows: dict[str, list[float]] = defaultdict(list)
    for name, at in marks.at.items():
        if "stop" not in at or "prepare" not in at:
            continue
        at = {**at, "exit": max(marks.last.get(name, at["stop"]), at["stop"])}
        previous = 0.0
        for phase in ("prepare", "wait", "connect", "greeting", "turns", "finalize"):
            if phase in at:
                rows[phase].append(at[phase] - previous)
                previous = at[phase]
        rows["exit"].append(at["exit"] - at["stop"])
        rows["agent, whole"].append(at["exit"])
    return rows


def run_once(args: argparse.Namespace) -> dict[str, Any]:
    """One real ``lkeval run`` of the suite in this process; figures per scenario."""
    global MARKS
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from run_phases import suite_run
    from suite_wall import write_inputs

    if args.one is not None:  # bench/_common just put this script's own tree first
        sys.path.insert(0, str(args.one))
    assert "lkeval" not in sys.modules, "the tree measured must be the first lkeval imported"
    MARKS = Marks()
    marks_dir = tempfile.mkdtemp(prefix="scenario-cpu-marks-") if args.marks else None
    instrument(args.profile_lkeval, args.profile_agents, marks_dir)
    from lkeval.cli import main as lkeval_main

    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        _, scenarios = write_inputs(work)
        if args.scenarios != 20:
            import yaml

            suite = yaml.safe_load(scenarios.read_text())
            suite["scenarios"] = (suite["scenarios"] * 10)[: args.scenarios]
            for k, s in enumerate(suite["scenarios"]):
                s = suite["scenarios"][k] = {**s, "id": f"bench-{k:03d}"}
            scenarios.write_text(yaml.safe_dump(suite))
        with suite_run(work, scenarios, args.concurrency) as argv:
            wall = time.monotonic()
            code = _quiet(lambda: lkeval_main(argv))
            wall = time.monotonic() - wall
            if args.keep_results:
                import shutil

                shutil.copy(work / "out" / "results.json", args.keep_results)
                shutil.copytree(work / "out", args.keep_results + ".out", dirs_exist_ok=True)
    MARKS.close()
    time.sleep(0.05)
    lkeval_cpu = time.process_time() - (MARKS.lkeval_first or 0.0)
    lkeval_cpu -= MARKS.own_cpu - MARKS.own_at_first
    threads = {}
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):
            stat = (task / "stat").read_bytes()
            name = stat[stat.index(b"(") + 1 : stat.rindex(b")")].decode()
            fields = stat[stat.rindex(b")") + 2 :].split()
            threads[f"{name} {task.name}"] = (int(fields[11]) + int(fields[12])) / _TICK
    if _PROFILE is not None:
        _PROFILE.dump(args.profile_lkeval)
    rows = phase_cpu(MARKS)
    n = len(rows["agent, whole"])
    fork_server = MARKS.fork_server_last - (MARKS.fork_server_first or 0.0)
    return {
        "marks": agent_marks(marks_dir) if marks_dir else {},
        "lkeval_threads": threads,
        "code": code,
        "load": [load, os.getloadavg()[0]],
        "wall": wall,
        "scenarios": n,
        "phases": {k: statistics.fmean(v) for k, v in rows.items()},
        "agent_mean": statistics.fmean(rows["agent, whole"]) if n else 0.0,
        "fork_server": fork_server / max(n, 1),
        "lkeval": lkeval_cpu / max(n, 1),
    }


def steps_once(tree: Path, repeat: int = 200) -> dict[str, float]:
    """lk-eval's per-scenario steps alone, ms of CPU each (this process, ``tree``'s code): the
    walk of an agent's process tree (every stop and every agent's exit walk one) on a live
    tree of 3 processes, and an agent's working directory made and cleaned."""
    from lkeval.agents.workdir import prepare_agent_dir
    from lkeval.host import tree

    sleepers = [subprocess.Popen(["sleep", "30"]) for _ in range(3)]
    out: dict[str, float] = {"processes on the machine": float(len(_pids()))}
    try:
        started = time.process_time()
        for _ in range(repeat):
            tree.process_tree(os.getpid())
        out["process_tree"] = (time.process_time() - started) / repeat * 1000
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.process_time()
        for k in range(repeat // 4):
            agent_dir = Path(tmp) / f"agent-{k}.files"
            prepare_agent_dir(agent_dir, tree)
            tree.clean_agent_dir(str(agent_dir))
        out["agent dir made and cleaned"] = (time.process_time() - started) / (repeat // 4) * 1000
    return out


def _pids() -> list[str]:
    return [name for name in os.listdir("/proc") if name.isdigit()]


def _quiet(call: Any) -> int:
    """Run ``call`` with stdout/stderr into a file (lk-eval's progress lines are not figures)."""
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            return int(call())
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)


def child(tree: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter with ``tree``'s lk-eval first on the path."""
    argv = [sys.executable, __file__, "--one", str(tree), "--concurrency", str(args.concurrency)]
    argv += ["--scenarios", str(args.scenarios)]
    if args.profile_lkeval:
        argv += ["--profile-lkeval", args.profile_lkeval]
    if args.profile_agents:
        argv += ["--profile-agents", args.profile_agents]
    if args.marks:
        argv += ["--marks"]
    if args.steps:
        argv += ["--steps"]
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def show(label: str, fig: dict[str, Any]) -> None:
    ph = fig["phases"]
    print(
        f"{label}: {fig['scenarios']} scenarios, exit {fig['code']}, wall {fig['wall']:.1f} s, "
        f"load {fig['load'][0]:.1f}->{fig['load'][1]:.1f}"
    )
    print(
        "  CPU-s per scenario (mean): agent {:.3f}, fork server {:.3f}, lk-eval {:.3f}; "
        "sum {:.3f}".format(
            fig["agent_mean"],
            fig["fork_server"],
            fig["lkeval"],
            fig["agent_mean"] + fig["fork_server"] + fig["lkeval"],
        )
    )
    print("  agent by phase (mean): " + ", ".join(f"{p} {ph.get(p, 0):.3f}" for p in PHASES))
    for step, cpu in fig.get("marks", {}).items():
        print(f"    {cpu * 1000:7.1f} ms  {step}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--scenarios", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--compare", type=Path)
    parser.add_argument("--profile-lkeval")
    parser.add_argument("--profile-agents", help="a directory: each agent's cProfile")
    parser.add_argument(
        "--marks", action="store_true", help="each agent's CPU at the steps of its life"
    )
    parser.add_argument(
        "--steps", action="store_true", help="only lk-eval's own per-scenario steps, alone"
    )
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--keep-results", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        sys.path.insert(0, str(args.one))  # this tree's lkeval, before anything imports it
        print(json.dumps(steps_once(args.one) if args.steps else run_once(args)))
        return 0
    here = Path(__file__).resolve().parent.parent
    trees = [("this tree", here), *([("compare", args.compare)] if args.compare else [])]
    for r in range(args.rounds):
        order = trees if r % 2 == 0 else trees[::-1]
        for label, tree in order:
            print(f"[round {r + 1}] {label} ({tree}); uptime: {os.getloadavg()[0]:.1f}")
            figures = child(tree, args)
            if args.steps:
                print("  " + ", ".join(f"{k} {v:.2f}" for k, v in figures.items()) + " (ms)")
            else:
                show(label, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
