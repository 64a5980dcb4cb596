"""Benchmark: the CPU one turn costs, split by process (issue 20.3).

Runs the real ``lkeval run`` twice per round on the same scripted suite, once with few turns per
scenario and once with many, and samples the CPU (utime + stime from ``/proc/PID/stat``) of
every process: lk-eval's own process, the fork server, every agent process (each one's last
figure before it exited), and the scripted LLM server (the bench's, not a user's: reported
apart). The difference between the two runs, divided by the extra turns, is the CPU of one turn
without the run's fixed costs (start-up, the fork server's preload, agent boots, reports).
Every LLM answer comes after ``--delay`` seconds (default 1 s, a real provider's pace): lk-eval
waits on each turn for that long, so what it does while waiting counts too.

``--compare DIR`` runs another checkout's ``lkeval`` (its own ``.venv``) in alternation with
this one, each round both trees, so a change is measured against its base in one time window.

    python bench/turn_cpu.py [--scenarios 16] [--turns 1,7] [--concurrency 8] [--rounds 2]
                             [--delay 1] [--compare /tmp/old-tree]

``--watch N`` measures only lk-eval's watch on live agents (``AgentProcess.wait_failure``, which
every request of a conversation races): N ``sleep`` processes watched for 8 s in this process,
CPU per agent-second (with ``--compare DIR``: that checkout's code instead of this one's).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml
from _common import (
    HOTEL_AGENT,
    ROOT,
    hotel_env,
    llm_server_process,
    machine,
    write_echo_rules,
)

_TICK = os.sysconf("SC_CLK_TCK")
ROLES = ("lk-eval", "fork server", "agents")


def write_inputs(work: Path, scenarios: int, turns: list[int], delay: float) -> Path:
    """The rules file; one scenarios file per turn count (``scenarios-N.yaml``)."""
    rules = write_echo_rules(work / "rules.yaml", delay)
    expect = [{"message": {"contains": "Noted"}}]
    for n in turns:
        suite = {
            "name": "Turn CPU bench",
            "scenarios": [
                {
                    "id": f"guest-{k:03d}",
                    "label": f"Guest {k}",
                    "turns": [
                        {"user": f"question {t} from {k}", "expect": expect} for t in range(n)
                    ],
                }
                for k in range(scenarios)
            ],
        }
        (work / f"scenarios-{n}.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    return rules


def cpu_seconds(pid: int) -> tuple[float, int] | None:
    """(utime + stime in seconds, parent pid) of a live process, or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICK, int(fields[1])


class TreeCPU:
    """Samples the CPU of every process under ``root`` every 0.05 s, keeping each one's last
    figure (so a process that has exited still counts, short of its last 50 ms)."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.last: dict[int, float] = {}
        self.parent: dict[int, int] = {}
        self.fork_server: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self._sample()
            if self._stop.wait(0.05):
                return

    def _sample(self) -> None:
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            seen = cpu_seconds(pid)
            if seen is None:
                continue
            cpu, ppid = seen
            if (
                pid == self.root
                or ppid == self.root
                or ppid == self.fork_server
                or pid in self.last
            ):
                self.last[pid] = cpu
                self.parent.setdefault(pid, ppid)
                if ppid == self.root and self.fork_server is None and _is_fork_server(pid):
                    self.fork_server = pid

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        out = dict.fromkeys(ROLES, 0.0)
        for pid, cpu in self.last.items():
            if pid == self.root:
                out["lk-eval"] += cpu
            elif pid == self.fork_server:
                out["fork server"] += cpu
            else:
                out["agents"] += cpu
        return out


def _is_fork_server(pid: int) -> bool:
    try:
        return b"fork_server" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def run_suite(
    tree: Path, scenarios: Path, env: dict[str, str], work: Path, c: int, llm_pid: int
) -> dict[str, float]:
    venv = tree / ".venv" / "bin" / "python"  # a checkout without its own venv uses ours
    python = venv if venv.exists() else Path(sys.executable)
    results = work / "results.json"
    llm_before = cpu_seconds(llm_pid)
    argv = [
        *(str(python), "-m", "lkeval", "run", "--agent", str(HOTEL_AGENT)),
        *("--scenarios", str(scenarios), "--results", str(results), "--comment", "off"),
        *("--no-github", "--repeat", "1", "--concurrency", str(c)),
    ]
    proc = subprocess.Popen(
        argv,
        env={**env, "PYTHONPATH": str(tree)},
        cwd=tree,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    sampler = TreeCPU(proc.pid)
    out, _ = proc.communicate()
    figures = sampler.stop()
    llm_after = cpu_seconds(llm_pid)
    if proc.returncode not in (0, 1) or not results.is_file():
        raise RuntimeError(f"lkeval run failed ({proc.returncode}):\n{out}")
    assert llm_before is not None and llm_after is not None
    figures["llm server"] = llm_after[0] - llm_before[0]
    if "passed" not in out.lower():
        print(out)
    return figures


def watch_only(agents: int, tree: Path, seconds: float = 8.0) -> None:
    """lk-eval's watch on ``agents`` live processes, alone: CPU per agent-second."""
    import asyncio

    sys.path.insert(0, str(tree))  # nothing of lk-eval is imported before this
    from lkeval.agents.process import AgentLaunch, AgentProcess

    async def watch(tmp: Path) -> float:
        watched = []
        for k in range(agents):
            agent = AgentProcess(AgentLaunch(HOTEL_AGENT), "{}", tmp / f"agent-{k}.log")
            agent.raw_log_path.write_bytes(b"x" * 20000)
            agent.proc = await asyncio.create_subprocess_exec("sleep", str(seconds + 30))
            watched.append(agent)
        started = time.process_time()
        watches = [asyncio.ensure_future(a.wait_failure()) for a in watched]
        await asyncio.sleep(seconds)
        used = time.process_time() - started
        for task, agent in zip(watches, watched, strict=True):
            task.cancel()
            assert agent.proc is not None
            agent.proc.kill()
            await agent.proc.wait()
        return used

    with tempfile.TemporaryDirectory() as tmp:
        used = asyncio.run(watch(Path(tmp)))
    print(
        f"watch of {agents} agents for {seconds:g} s: {used * 1000 / seconds / agents:.2f} ms "
        f"CPU per agent-second ({sys.modules[AgentProcess.__module__].__file__})  "
        f"load {os.getloadavg()[0]:.1f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=16)
    parser.add_argument("--turns", default="1,7", help="few,many turns per scenario")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--compare", type=Path, help="another checkout, run in alternation")
    parser.add_argument("--watch", type=int, metavar="N", help="only the watch on N agents")
    args = parser.parse_args()
    if args.watch:
        watch_only(args.watch, (args.compare or ROOT).resolve())
        return 0
    few, many = (int(n) for n in args.turns.split(","))
    trees = {"this": ROOT} | ({"other": args.compare.resolve()} if args.compare else {})
    print(f"machine: {machine()}")
    print(
        f"{args.scenarios} scenarios x {few} and x {many} turns, c={args.concurrency}, "
        f"every LLM answer after {args.delay:g} s; CPU-seconds from /proc"
    )
    per_turn: dict[str, dict[str, list[float]]] = {t: {} for t in trees}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rules = write_inputs(work, args.scenarios, [few, many], args.delay)
        with llm_server_process(rules) as base_url:
            llm_pid = _llm_pid(base_url)
            env = {**os.environ, **hotel_env(base_url)}
            env.pop("GITHUB_ACTIONS", None)
            env.pop("VIRTUAL_ENV", None)
            for r in range(args.rounds):
                for name, tree in trees.items():
                    runs = {}
                    for n in (few, many):
                        started = time.monotonic()
                        runs[n] = run_suite(
                            tree, work / f"scenarios-{n}.yaml", env, work, args.concurrency, llm_pid
                        )
                        wall = time.monotonic() - started
                        print(
                            f"  round {r + 1} {name:5s} {n:2d} turns: wall {wall:5.1f}s  "
                            + "  ".join(f"{k} {v:6.2f}s" for k, v in runs[n].items())
                            + f"  load {os.getloadavg()[0]:.1f}",
                            flush=True,
                        )
                    extra = args.scenarios * (many - few)
                    for role in runs[many]:
                        ms = (runs[many][role] - runs[few][role]) / extra * 1000
                        per_turn[name].setdefault(role, []).append(ms)
    report(per_turn, trees)
    return 0


def report(per_turn: dict[str, dict[str, list[float]]], trees: dict[str, Path]) -> None:
    """Each tree's CPU per turn by process, and lk-eval's and its agents' together."""
    print("\nCPU per turn (ms, median of the rounds; min-max):")
    for name, roles in per_turn.items():
        rounds = len(next(iter(roles.values())))
        # the fork server does nothing per turn: its difference is the noise of its preload
        ours = [roles["lk-eval"][i] + roles["agents"][i] for i in range(rounds)]
        cells = "  ".join(f"{k} {_cell(v)}" for k, v in roles.items())
        print(f"  {name:5s} {trees[name]}: {cells}  | lk-eval + agents {_cell(ours)}")


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):6.1f} ({min(values):.1f}-{max(values):.1f})"


def _llm_pid(base_url: str) -> int:
    """The scripted LLM server's pid: the child of this process listening on its port."""
    port = base_url.rsplit(":", 1)[1].split("/", 1)[0]
    for name in os.listdir("/proc"):
        if name.isdigit() and cpu_seconds(int(name)) is not None:
            seen = cpu_seconds(int(name))
            if seen and seen[1] == os.getpid() and _listens(int(name), int(port)):
                return int(name)
    raise RuntimeError("the LLM server's process was not found")


def _listens(pid: int, port: int) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"llm_server" in cmd and port > 0


if __name__ == "__main__":
    sys.exit(main())
