"""Benchmark: one scenario's edit-and-rerun wall, ``lkeval dev`` against ``lkeval run --repeat 1``.

The loop a developer runs while changing a prompt: edit the agent, run one scenario again, read
the verdict. Each round edits the example agent (a copy, one comment line appended: its module
is compiled again, as after a real edit), then runs the whole command as a process, from its
start to its exit: ``lkeval dev`` and ``lkeval run --repeat 1`` in turn (A B A B ...), so a
drift of the machine's speed hits both alike, and the ratio is taken pair by pair. Both play
``SCN_bookAda01`` (two scripted turns, a handoff, judged) against the same scripted LLM in its
own process, with a judge, so each pays what a developer's run pays: ``run`` its judge
preflight every time, ``dev`` once per judge (the first, unmeasured round keeps it).

    python bench/dev_loop.py [--rounds 5] [--scenario SCN_bookAda01]

A third figure is the same edit under ``lkeval dev --watch`` (one process that stays; each
save re-imports the agent's own modules, not livekit): from the save to its gate line.

The goal (issue 32): dev's median at most half of run's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import HOTEL, HOTEL_RULES, edit, hotel_env, llm_server_process, machine, stats, wall


class Watcher:
    """``lkeval dev --watch`` running: each edit's wall is from the save to its gate line."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        env = {**env, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.next_gate()  # its first run: imports and all, unmeasured

    def next_gate(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("lk-eval: watching"):
                return
        sys.exit(f"lkeval dev --watch ended ({self.proc.wait()})")

    def rerun(self, agent: Path, edit_no: int) -> float:
        started = time.perf_counter()
        edit(agent, edit_no)
        self.next_gate()
        return time.perf_counter() - started

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scenario", default="SCN_bookAda01")
    args = parser.parse_args()
    print(machine())
    with (
        tempfile.TemporaryDirectory(prefix="lkeval-dev-loop-") as tmp,
        llm_server_process(HOTEL_RULES) as base_url,
    ):
        work = Path(tmp)
        shutil.copytree(HOTEL, work / "hotel")
        agent, scenarios = work / "hotel" / "agent.py", work / "hotel" / "scenarios.yaml"
        env = {**os.environ, **hotel_env(base_url), "XDG_CACHE_HOME": str(work / "cache")}
        common = ["--agent", str(agent), "--scenarios", str(scenarios), "--match", args.scenario]
        common += ["--caller-model", "caller", "--judge-model", "judge", "--no-settings"]
        lkeval = [sys.executable, "-m", "lkeval"]
        dev_results, run_results = str(work / "dev.json"), str(work / "run.json")
        commands = {
            "dev": [*lkeval, "dev", *common, "--results", dev_results],
            "run": [*lkeval, "run", *common, "--repeat", "1", "--results", run_results],
        }
        for argv in commands.values():  # unmeasured: dev keeps its preflight from here
            wall(argv, env, work, ok=(0, 1))
        # the watcher's own copy: the other commands' edits must not wake it
        shutil.copytree(HOTEL, work / "watched")
        watched = work / "watched" / "agent.py"
        watch_argv = [*commands["dev"], "--watch", "--results", str(work / "watch.json")]
        watch_argv[watch_argv.index(str(agent))] = str(watched)
        watcher = Watcher(watch_argv, env, work)
        times: dict[str, list[float]] = {"dev": [], "run": [], "dev --watch": []}
        try:
            for round_no in range(args.rounds):
                for name, argv in commands.items():
                    edit(agent, sum(map(len, times.values())))
                    times[name].append(wall(argv, env, work, ok=(0, 1)))
                edits = sum(map(len, times.values()))
                times["dev --watch"].append(watcher.rerun(watched, edits))
                laps = ", ".join(f"{name} {t[-1]:.2f} s" for name, t in times.items())
                print(f"round {round_no + 1}: {laps}", flush=True)
        finally:
            watcher.stop()
    for name, walls in times.items():
        print(f"{name:21} wall: {stats(walls)}")
    for name in ("dev", "dev --watch"):
        ratios = [d / r for d, r in zip(times[name], times["run"], strict=True)]
        spread = f"min {min(ratios):.2f}, max {max(ratios):.2f}, n={len(ratios)}"
        print(f"{name} / run, pair by pair: median {statistics.median(ratios):.2f} ({spread})")
    print(f"goal: median <= 0.50; load now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
