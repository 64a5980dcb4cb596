"""Benchmark (d): memory per concurrent agent, cold vs warm (Linux: /proc/PID/smaps_rollup).

N agents of the example run at once; each has greeted and answered one tool turn (so the
OpenAI SDK path is in memory) when we read its USS (pages only it maps: what one more agent
costs) and PSS (its fair share of shared pages). Warm agents share the fork server's preloaded
pages, so the server's own PSS is reported too: it is paid once per run, not per agent.

    python bench/memory.py [--agents 4]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

from _common import hotel_fork_server, machine, mib, smaps_rollup

from lkeval.agents.process import AgentLaunch, AgentProcess
from lkeval.agents.protocol import SessionConnection
from lkeval.run.conversation import Conversation

DISPATCH = '{"simulationRunId": "bench", "jobId": "j", "scenario": {"id": "bench"}}'


async def measure(
    launch: AgentLaunch, n: int, work: Path, server_pid: int | None = None
) -> tuple[list[dict[str, int]], dict[str, int]]:
    """Boot n agents at once, talk to each, read their memory (and the fork server's while
    they share its pages), stop them."""
    agents = []
    for k in range(n):
        dispatch = work / f"{k}.dispatch.json"
        dispatch.write_text(DISPATCH)
        agents.append(AgentProcess(launch, dispatch, work / f"{k}.log"))
    conns = await asyncio.gather(*(a.start(120) for a in agents))
    try:

        async def talk(agent: AgentProcess, conn: SessionConnection) -> None:
            conv = Conversation(conn, agent, 30)
            await conv.wait_for_greeting(30)
            await conv.turn(1, "Is a double room free for two nights?")

        await asyncio.gather(*(talk(a, c) for a, c in zip(agents, conns, strict=True)))
        await asyncio.sleep(0.5)
        rows = [smaps_rollup(a.proc.pid) for a in agents if a.proc is not None]
        return rows, (smaps_rollup(server_pid) if server_pid else {})
    finally:
        for conn in conns:
            await conn.close()
        await asyncio.gather(*(a.stop(5) for a in agents))


def report(name: str, rows: list[dict[str, int]], extra_pss: int = 0) -> float:
    uss = [r["Uss"] for r in rows]
    pss = [r["Pss"] for r in rows]
    rss = statistics.median(r["Rss"] for r in rows)
    total = sum(pss) + extra_pss
    print(
        f"  {name}: USS per agent median {mib(statistics.median(uss))} "
        f"(min {mib(min(uss))}, max {mib(max(uss))}); PSS per agent median "
        f"{mib(statistics.median(pss))}; RSS median {mib(rss)}; "
        f"all {len(rows)} agents{' + server' if extra_pss else ''}: PSS {mib(total)}"
    )
    return statistics.median(uss) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=4)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    with hotel_fork_server() as (base, server, tmp):
        warm_launch = AgentLaunch(base.agent, env=base.env, launcher=server)
        cold, _ = asyncio.run(measure(base, args.agents, tmp))
        warm, server_mem = asyncio.run(measure(warm_launch, args.agents, tmp, server.pid))
    print(f"\nmemory of {args.agents} concurrent agents (each after its greeting and a tool turn)")
    cold_uss = report("cold", cold)
    warm_uss = report("warm", warm, server_mem["Pss"])
    print(
        f"  fork server: RSS {mib(server_mem['Rss'])}, PSS {mib(server_mem['Pss'])}, "
        f"USS {mib(server_mem['Uss'])} while the agents run (once per run)"
    )
    print(
        f"  each extra warm agent costs {warm_uss:.1f} MiB USS vs {cold_uss:.1f} MiB cold "
        f"({cold_uss / warm_uss:.1f}x less); target <= 50 MiB: "
        f"{'met' if warm_uss <= 50 else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
