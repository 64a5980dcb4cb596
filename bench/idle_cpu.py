"""Benchmark: the CPU one agent process spends while it waits (issue 20.1/20.3).

A warm agent of the example (forked from the fork server, as ``lkeval run`` does) is measured
twice, from ``/proc/PID/stat`` (utime + stime) over ``--seconds``:

- *held*: prepared, waiting for its conversation slot (``go`` not sent);
- *waiting*: in its conversation, greeted, waiting for the caller's next line.

Nothing the agent does in either state is work for the scenario: what it spends is the
framework's and lk-eval's timers (``docs/protocol.md``, "The framework's idle timers"). The
busiest threads' shares are printed too (``/proc/PID/task``).

``--compare DIR`` measures another checkout (e.g. a ``git archive`` of main) in alternation
with this one, ``--rounds`` times each, in the same time window.

    python bench/idle_cpu.py [--seconds 10] [--rounds 3] [--compare /tmp/old-tree]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> dict[int, float]:
    """utime + stime of each thread of ``pid`` (tid -> seconds)."""
    out: dict[int, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / _TICK
    return out


async def sample(pid: int, seconds: float) -> dict[str, object]:
    """CPU ms per second of ``pid`` over ``seconds``, in all and by thread."""
    before, t0 = cpu_seconds(pid), time.monotonic()
    await asyncio.sleep(seconds)
    after, elapsed = cpu_seconds(pid), time.monotonic() - t0
    per_thread = {tid: (cpu - before.get(tid, 0.0)) * 1000 / elapsed for tid, cpu in after.items()}
    busy = sorted(per_thread.values(), reverse=True)
    return {
        "ms_per_s": sum(per_thread.values()),
        "threads": len(after),
        "busiest": [round(x, 2) for x in busy[:4]],
    }


async def measure_one(seconds: float) -> dict[str, object]:
    """Boot one warm agent, measure it held, then waiting in its conversation."""
    from _common import hotel_fork_server

    from lkeval.agents.process import AgentLaunch, AgentProcess
    from lkeval.run.conversation import Conversation

    dispatch = '{"simulationRunId": "bench", "jobId": "j", "scenario": {"id": "bench"}}'
    with hotel_fork_server() as (base, server, tmp):
        launch = AgentLaunch(base.agent, env=base.env, launcher=server)
        (tmp / "d.json").write_text(dispatch)
        agent = AgentProcess(launch, tmp / "d.json", tmp / "agent.log")
        await agent.prepare(120)
        assert agent.proc is not None
        try:
            await asyncio.sleep(1.0)  # the prepare's own tail settles
            held = await sample(agent.proc.pid, seconds)
            conn = await agent.connect(120)
            await Conversation(conn, agent, 30).wait_for_greeting(30)
            await asyncio.sleep(1.0)
            waiting = await sample(agent.proc.pid, seconds)
            await conn.close()
        finally:
            await agent.stop(5)
    return {"held": held, "waiting": waiting}


def run_tree(tree: Path, seconds: float) -> dict[str, object]:
    """This script's measurement with ``tree``'s lk-eval, in a fresh interpreter."""
    code = (
        f"import sys; sys.path[:0] = [{str(tree)!r}, {str(tree / 'bench')!r}, "
        f"{str(Path(__file__).parent)!r}]; import asyncio, json, idle_cpu; "
        f"print('RESULT ' + json.dumps(asyncio.run(idle_cpu.measure_one({seconds}))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, check=False
    )
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, object] = json.loads(line[7:])
            return result
    raise SystemExit(f"{tree}: no result\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")


def uptime() -> str:
    """The load averages (1, 5, 15 min), printed beside every figure."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--compare", type=Path, help="another checkout, run in alternation")
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    trees = {"this": here} | ({"other": args.compare.resolve()} if args.compare else {})
    for k in range(args.rounds):
        for name, tree in trees.items():
            result = run_tree(tree, args.seconds)
            for state in ("held", "waiting"):
                r = result[state]
                assert isinstance(r, dict)
                print(
                    f"round {k + 1} {name:5} {state:7}: {r['ms_per_s']:6.2f} ms CPU/s "
                    f"({r['threads']} threads, busiest {r['busiest']})  load {uptime()}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
