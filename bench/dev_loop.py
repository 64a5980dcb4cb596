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

from _common import HOTEL, HOTEL_RULES, hotel_env, llm_server_process, machine, stats


def edit(agent: Path, round_no: int) -> None:
    """What a developer's edit does to the agent module: new source, compiled again."""
    with agent.open("a", encoding="utf-8") as fh:
        fh.write(f"# edit {round_no}\n")


def wall(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int]:
    """(seconds from start to exit, exit code) of one command."""
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        sys.exit(f"{argv[3]} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return seconds, done.returncode


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
            wall(argv, env, work)
        times: dict[str, list[float]] = {"dev": [], "run": []}
        for round_no in range(args.rounds):
            for name, argv in commands.items():
                edit(agent, sum(map(len, times.values())))
                seconds, _ = wall(argv, env, work)
                times[name].append(seconds)
                print(f"round {round_no + 1} {name}: {seconds:.2f} s", flush=True)
    ratios = [d / r for d, r in zip(times["dev"], times["run"], strict=True)]
    print(f"lkeval dev            wall s: {stats(times['dev'])}")
    print(f"lkeval run --repeat 1 wall s: {stats(times['run'])}")
    spread = f"min {min(ratios):.2f}, max {max(ratios):.2f}, n={len(ratios)}"
    print(f"dev / run, pair by pair: median {statistics.median(ratios):.2f} ({spread})")
    print(f"goal: median <= 0.50; load now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
