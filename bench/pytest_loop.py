"""Benchmark: one scenario's edit-and-rerun wall under pytest (the plugin, in-process) against
``lkeval run --repeat 1``.

The loop a developer runs in the test runner they already use: edit the agent, run one scenario
again, read the verdict. Each round edits the example agent (a copy, one comment line appended:
its module is compiled again, as after a real edit), then runs the whole command as a process,
from its start to its exit: ``pytest -k SCENARIO`` with the plugin and ``lkeval run --repeat 1
--match SCENARIO`` in turn (A B A B ...), so a drift of the machine's speed hits both alike, and
the ratio is taken pair by pair. Both play ``SCN_bookAda01`` (two scripted turns, a handoff,
judged) against the same scripted LLM in its own process, with a judge: ``run`` asks its judge
preflight every time, pytest once per judge (the first, unmeasured round keeps it).

    python bench/pytest_loop.py [--rounds 5] [--scenario SCN_bookAda01]

The goal (issue 32): pytest's median at most half of run's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from _common import HOTEL, HOTEL_RULES, edit, hotel_env, llm_server_process, machine, stats, wall


def commands(work: Path, scenario: str) -> dict[str, list[str]]:
    """The two commands, on the copy of the example in ``work``."""
    agent, scenarios = work / "hotel" / "agent.py", work / "hotel" / "scenarios.yaml"
    llms = "--caller-model caller --judge-model judge --no-settings"
    pytest_argv = [
        *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
        *("--rootdir", str(work), "--lkeval-scenarios", str(scenarios)),
        *("--lkeval-agent", str(agent), f"--lkeval-run-args={llms}", "-k", scenario),
    ]
    run_argv = [
        *(sys.executable, "-m", "lkeval", "run", "--agent", str(agent)),
        *("--scenarios", str(scenarios), "--match", scenario, *llms.split()),
        *("--repeat", "1", "--results", str(work / "run.json")),
    ]
    return {"pytest": pytest_argv, "run": run_argv}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scenario", default="SCN_bookAda01")
    args = parser.parse_args()
    print(machine())
    with (
        tempfile.TemporaryDirectory(prefix="lkeval-pytest-loop-") as tmp,
        llm_server_process(HOTEL_RULES) as base_url,
    ):
        work = Path(tmp)
        shutil.copytree(HOTEL, work / "hotel")
        env = {**os.environ, **hotel_env(base_url), "XDG_CACHE_HOME": str(work / "cache")}
        argvs = commands(work, args.scenario)
        for argv in argvs.values():  # unmeasured: pytest keeps its preflight from here
            wall(argv, env, work)
        times: dict[str, list[float]] = {name: [] for name in argvs}
        for round_no in range(args.rounds):
            for name, argv in argvs.items():
                edit(work / "hotel" / "agent.py", sum(map(len, times.values())))
                times[name].append(wall(argv, env, work))
                print(f"round {round_no + 1} {name}: {times[name][-1]:.2f} s", flush=True)
    ratios = [p / r for p, r in zip(times["pytest"], times["run"], strict=True)]
    print(f"pytest -k (plugin)    wall s: {stats(times['pytest'])}")
    print(f"lkeval run --repeat 1 wall s: {stats(times['run'])}")
    spread = f"min {min(ratios):.2f}, max {max(ratios):.2f}, n={len(ratios)}"
    print(f"pytest / run, pair by pair: median {statistics.median(ratios):.2f} ({spread})")
    print(f"goal: median <= 0.50; load now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
