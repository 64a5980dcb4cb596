"""Benchmark (a): start-to-ready per scenario, cold vs warm; and exit time after SIGTERM.

start-to-ready is what a scenario waits before its first request can be answered: from the
spawn call (``AgentProcess.start``) to the agent's first ``ping`` answer. Cold and warm starts
alternate so that machine noise hits both alike. Then, once the greeting is over, the agent
gets SIGTERM and we time until its exit is observed (``AgentProcess.stop``).

    python bench/start_to_ready.py [--runs 12]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

from _common import hotel_fork_server, machine, stats

from lkeval.agents.fork_client import ForkServer
from lkeval.agents.process import AgentLaunch, AgentProcess
from lkeval.agents.protocol import pb
from lkeval.run.conversation import Conversation

DISPATCH = '{"simulationRunId": "bench", "jobId": "j", "scenario": {"id": "bench"}}'


async def one(launch: AgentLaunch, work: Path, n: int) -> tuple[float, float, str]:
    """(start-to-ready, exit after SIGTERM, start mode) of one agent."""
    dispatch = work / f"{n}.dispatch.json"
    dispatch.write_text(DISPATCH)
    agent = AgentProcess(launch, dispatch, work / f"{n}.log")
    started = time.monotonic()
    conn = await agent.start(60)
    await conn.request(pb.SessionRequest(ping=pb.SessionRequest.Ping()), 30)
    ready = time.monotonic() - started
    await Conversation(conn, agent, 30).wait_for_greeting(30)
    await conn.close()
    stopping = time.monotonic()
    await agent.stop(5)
    return ready, time.monotonic() - stopping, agent.start_mode or "?"


async def bench(runs: int, server: ForkServer, base: AgentLaunch, work: Path) -> dict[str, list]:
    cold = AgentLaunch(base.agent, env=base.env)
    warm = AgentLaunch(base.agent, env=base.env, launcher=server)
    out: dict[str, list] = {"cold": [], "warm": []}
    for n in range(runs):
        for name, launch in (("cold", cold), ("warm", warm)):
            ready, exit_s, mode = await one(launch, work, n * 2 + (name == "warm"))
            assert mode == name, f"{name} run started {mode}"
            out[name].append((ready, exit_s))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    with hotel_fork_server() as (base, server, tmp):
        out = asyncio.run(bench(args.runs, server, base, tmp))
    ready = {k: [r for r, _ in v] for k, v in out.items()}
    exits = {k: [e for _, e in v] for k, v in out.items()}
    print("\nstart-to-ready (spawn -> first pong), sequential, the example hotel agent")
    for name in ("cold", "warm"):
        print(f"  {name}: {stats(ready[name])}")
    ratio = statistics.median(ready["cold"]) / statistics.median(ready["warm"])
    print(
        f"  warm is {ratio:.1f}x faster than cold (median; target >= 15x: "
        f"{'met' if ratio >= 15 else 'NOT met'})"
    )
    print("\nexit after SIGTERM (signal -> exit observed by the runner)")
    for name in ("cold", "warm"):
        print(f"  {name}: {stats(exits[name])}")
    worst = max(statistics.median(exits["cold"]), statistics.median(exits["warm"]))
    print(f"  target <= 100 ms: {'met' if worst <= 0.1 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
