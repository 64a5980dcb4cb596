"""Benchmark: how soon a 1-scenario ``lkeval run`` reaches its first agent, and how soon it
exits after its gate line (issue 20.4, "start-up overlaps").

One scripted scenario against the example agent, judged (so the run does the judge preflight:
7 canary asks), every LLM answer at once (a zero-latency LLM: the scripted server in this
process). Per run, from the moment ``lkeval run`` is started:

* ``spawn``: the first agent's raw log appears (lk-eval has forked or started the agent; the
  bench gives lk-eval its own TMPDIR and polls it every 5 ms);
* ``first agent``: the agent's first LLM request, its greeting (the agent is up, connected
  and talking: its first pong is a few ms before it);
* ``gate -> exit``: from the gate line on stdout to the process's exit;
* ``fork server``: the fork server is started (its log appears in lk-eval's TMPDIR).

The floor, measured in the same rounds: how soon the example agent can make its first LLM
request at all when nothing else runs first (no lk-eval start, no checks, no preflight), from
this process, which has everything of its own imported already:

* ``floor: cold``: one cold agent (lk-eval's agent host, which runs LiveKit's console) started
  at 0, to its first LLM request: a bare console agent's own start-up;
* ``floor: warm``: the fork server started at 0, then, once it is ready, one agent forked from
  it, to its first LLM request: what lk-eval's warm path costs with nothing before it.

``above floor`` is lk-eval's ``first agent`` minus the lower floor (medians).

With ``--compare DIR`` the same runs alternate with another checkout (``git worktree add
--detach DIR COMMIT``), whose ``lkeval`` is put first on ``PYTHONPATH``:

    python bench/first_agent.py [--runs 5] [--compare /tmp/old-tree]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml
from _common import HOTEL_AGENT, HOTEL_RULES, ROOT, hotel_env, machine
from start_to_ready import one

from lkeval.agents.fork_client import ForkServer
from lkeval.agents.process import AgentLaunch, agent_env
from lkeval.testing.llm_server import LLMServer, RecordedRequest

SCENARIOS = {
    "name": "First agent",
    "scenarios": [
        {
            "id": "first",
            "label": "First",
            "turns": [
                {
                    "user": "is a double room free?",
                    "expect": [{"function_call": {"name": "check_availability"}}],
                }
            ],
            "agent_expectations": "The agent checks availability.",
        }
    ],
}


class StampedServer(LLMServer):
    """The scripted server, noting when each request arrived (monotonic clock)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stamps: list[tuple[float, str]] = []

    def _record(self, request: RecordedRequest) -> None:
        self.stamps.append((time.monotonic(), str(request.body.get("model"))))
        super()._record(request)


def watch_spawn(tmpdir: Path, found: dict[str, float], stop: threading.Event) -> None:
    """Note when the fork server's log and the first agent's log appear in lk-eval's TMPDIR."""
    patterns = {"fork server": "fork-server.log", "spawn": "first*.log"}
    while not stop.is_set() and len(found) < len(patterns):
        for name, pattern in patterns.items():
            if name not in found and any(tmpdir.glob(f"lkeval-raw-logs-*/{pattern}")):
                found[name] = time.monotonic()
        time.sleep(0.005)


def one_run(server: StampedServer, tree: Path) -> dict[str, float]:
    """One ``lkeval run`` from ``tree``: its figures in seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        scenarios = work / "scenarios.yaml"
        scenarios.write_text(yaml.safe_dump(SCENARIOS, sort_keys=False))
        private = work / "tmp"
        private.mkdir()
        drop = ("GITHUB_", "INPUT_", "OPENAI_", "LKEVAL_", "LIVEKIT_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(drop) and k != "CI"}
        env.update(hotel_env(server.base_url), TMPDIR=str(private), PYTHONPATH=str(tree))
        argv = [sys.executable, "-m", "lkeval", "run", "--agent", str(HOTEL_AGENT)]
        argv += ["--scenarios", str(scenarios), "--results", str(work / "results.json")]
        argv += ["--repeat", "1", "--judge-model", "judge", "--no-github"]
        spawned: dict[str, float] = {}
        stop = threading.Event()
        watcher = threading.Thread(target=watch_spawn, args=(private, spawned, stop))
        server.stamps.clear()
        started = time.monotonic()
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True, cwd=work)
        watcher.start()
        gate = None
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("lk-eval gate:"):
                gate = time.monotonic()
        code = proc.wait()
        exited = time.monotonic()
        stop.set()
        watcher.join()
    agent = [t for t, model in server.stamps if model == "hotel-agent"]
    judge = [t for t, model in server.stamps if model == "judge"]
    if code != 0 or gate is None or not agent or "spawn" not in spawned:
        raise RuntimeError(f"run from {tree} failed: exit {code}, gate line {gate is not None}")
    return {
        "first judge ask": judge[0] - started,
        "fork server": spawned.get("fork server", exited) - started,
        "spawn": spawned["spawn"] - started,
        "first agent": agent[0] - started,
        "gate -> exit": exited - gate,
        "wall": exited - started,
    }


def first_request(server: StampedServer, started: float) -> float:
    agent = [t for t, model in server.stamps if model == "hotel-agent"]
    if not agent:
        raise RuntimeError("the agent made no LLM request")
    return agent[0] - started


def floor_cold(server: StampedServer, work: Path) -> float:
    """A cold agent started at 0: seconds to its first LLM request."""
    launch = AgentLaunch(HOTEL_AGENT, env=hotel_env(server.base_url))
    server.stamps.clear()
    started = time.monotonic()
    asyncio.run(one(launch, work, 0))
    return first_request(server, started)


def floor_warm(server: StampedServer, work: Path) -> float:
    """The fork server started at 0, then one agent forked once it is ready: seconds to the
    agent's first LLM request."""
    base = AgentLaunch(HOTEL_AGENT, env=hotel_env(server.base_url))
    server.stamps.clear()
    started = time.monotonic()
    fork_server = ForkServer.begin(sys.executable, agent_env(base), agent=HOTEL_AGENT)
    try:
        fork_server.wait_ready()
        warm = AgentLaunch(HOTEL_AGENT, env=base.env, launcher=fork_server)
        _, _, mode = asyncio.run(one(warm, work, 1))
    finally:
        fork_server.close()
    if mode != "warm":
        raise RuntimeError(f"the floor's agent started {mode}, not warm")
    return first_request(server, started)


def floors(server: StampedServer) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        return {
            "floor: cold": floor_cold(server, Path(tmp)),
            "floor: warm": floor_warm(server, Path(tmp)),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--compare", type=Path, help="another checkout, alternated with this")
    args = parser.parse_args()
    trees = {"this": ROOT} | ({"other": args.compare.resolve()} if args.compare else {})
    figures: dict[str, dict[str, list[float]]] = {name: {} for name in [*trees, "floor"]}
    server = StampedServer(yaml.safe_load(HOTEL_RULES.read_text())["rules"])
    with server:
        for tree in trees.values():  # a warm-up each: page cache, .pyc files
            one_run(server, tree)
        for k in range(args.runs):
            print(f"run {k + 1}/{args.runs}: load {os.getloadavg()[0]:.2f}", flush=True)
            for name, tree in trees.items():
                for key, value in one_run(server, tree).items():
                    figures[name].setdefault(key, []).append(value)
            for key, value in floors(server).items():
                figures["floor"].setdefault(key, []).append(value)
    print(machine())
    floor = min(statistics.median(v) for v in figures["floor"].values())
    for name, where in [*trees.items(), ("floor", "the example agent alone, nothing before it")]:
        print(f"{name} ({where}):")
        for key, values in figures[name].items():
            print(
                f"    {key:16s} median {statistics.median(values):6.2f} s  "
                f"(min {min(values):.2f}, max {max(values):.2f}, n={len(values)})"
            )
        if name != "floor":
            above = statistics.median(figures[name]["first agent"]) - floor
            print(f"    {'above floor':16s} {above:+6.2f} s  (first agent minus the lower floor)")


if __name__ == "__main__":
    main()
