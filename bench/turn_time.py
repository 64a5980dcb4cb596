"""Benchmark (b): time per turn over the console vs the same agent in-process.

The floor is LiveKit's own test-framework path: the example agent in this process with
``AgentSession.run`` (no console, no socket, no logging). The console path is what lk-eval
measures: a ``run_input`` request over TCP to a (warm-started) agent process, until its
answer. Same agent class, same scripted LLM (a separate process, zero delay), same sequence of
turns (history grows alike): a text turn ("hello": one LLM call) and a tool turn
(availability: tool call, tool, reply) alternating.

``--metrics`` measures instead what collecting the turn metrics (lk-eval's clock, the agent's
``ChatMessage.metrics``, tool times: :mod:`lkeval.run.turn_metrics`) costs per turn: the time
spent in it on every real turn, as a share of the turn, and console sessions with the
collection on and off, alternated (target: <= 1% difference).

    python bench/turn_time.py [--sessions 3] [--turns 10] [--metrics]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from _common import HOTEL_AGENT, HOTEL_RULES, hotel_env, llm_server_process, machine, stats

import lkeval.run.conversation as conversation_module
from lkeval.agents.fork_client import ForkServer
from lkeval.agents.process import AgentLaunch, AgentProcess, agent_env
from lkeval.results.model import TurnMetrics
from lkeval.run.conversation import Conversation
from lkeval.run.turn_metrics import measure_turn

TURNS = (("tool", "Is a double room free for two nights?"), ("text", "hello"))
DISPATCH = '{"simulationRunId": "bench", "jobId": "j", "scenario": {"id": "bench"}}'


def load_agent_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hotel_agent_bench", HOTEL_AGENT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while defining
    spec.loader.exec_module(module)
    return module


async def in_process(agent_mod: ModuleType, turns: int) -> dict[str, list[float]]:
    """LiveKit's test path: AgentSession.run on the agent, in this process."""
    from livekit.agents import AgentSession
    from livekit.plugins import openai

    out: dict[str, list[float]] = {"text": [], "tool": []}
    llm = openai.LLM(model="hotel-agent")
    async with AgentSession(userdata=agent_mod.Desk(), llm=llm) as sess:
        await sess.start(agent_mod.FrontDeskAgent())
        await _greeted(sess)
        for k in range(turns * 2):
            kind, text = TURNS[k % 2]
            started = time.perf_counter()
            result: Any = await sess.run(user_input=text)
            out[kind].append(time.perf_counter() - started)
            assert result.events, "no events: the turn did nothing"
    await llm.aclose()
    return out


async def _greeted(sess: Any, timeout: float = 10) -> None:
    """Wait for the on_enter greeting to finish, as lk-eval does before turn one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        said = any(getattr(i, "role", None) == "assistant" for i in sess.history.items)
        if said and sess.agent_state == "listening":
            return
        await asyncio.sleep(0.01)
    raise TimeoutError("no greeting")


async def console(launch: AgentLaunch, turns: int, work: Path) -> dict[str, list[float]]:
    """lk-eval's path: run_input over the console protocol to an agent process."""
    out: dict[str, list[float]] = {"text": [], "tool": []}
    dispatch = work / "dispatch.json"
    dispatch.write_text(DISPATCH)
    agent = AgentProcess(launch, dispatch, work / "agent.log")
    conn = await agent.start(60)
    try:
        conv = Conversation(conn, agent, 30)
        await conv.wait_for_greeting(30)
        for k in range(turns * 2):
            kind, text = TURNS[k % 2]
            _, seconds = await conv.turn(k + 1, text)
            out[kind].append(seconds)
    finally:
        await conn.close()
        await agent.stop(5)
    return out


SPENT: list[float] = []


def timed_measure_turn(turn_no: int, elapsed: float, items: Any) -> TurnMetrics:
    """The real collection, timed: what each turn pays for its metrics."""
    started = time.perf_counter()
    try:
        return measure_turn(turn_no, elapsed, items)
    finally:
        SPENT.append(time.perf_counter() - started)


def no_metrics(turn_no: int, elapsed: float, items: Any) -> TurnMetrics:
    """Collection off: lk-eval's clock only, nothing read from the answer."""
    return TurnMetrics(turn_no, elapsed * 1000)


def metrics_overhead(args: argparse.Namespace) -> int:
    """Console turns with the metrics collection timed, then on vs off."""
    runs: dict[str, list[float]] = {"on": [], "off": []}
    with llm_server_process(HOTEL_RULES) as base_url, tempfile.TemporaryDirectory() as tmp:
        launch0 = AgentLaunch(HOTEL_AGENT, env=hotel_env(base_url))
        server = ForkServer.start(sys.executable, agent_env(launch0), agent=HOTEL_AGENT)
        launch = AgentLaunch(HOTEL_AGENT, env=hotel_env(base_url), launcher=server)
        try:
            for _ in range(args.sessions):  # alternate, so machine noise hits both alike
                for mode, collect in (("on", timed_measure_turn), ("off", no_metrics)):
                    conversation_module.measure_turn = collect  # type: ignore[assignment]
                    got = asyncio.run(console(launch, args.turns, Path(tmp)))
                    runs[mode] += got["text"] + got["tool"]
        finally:
            conversation_module.measure_turn = measure_turn
            server.close()
    share = sum(SPENT) / sum(runs["on"])
    print(f"\nmetrics collection, {args.sessions} x 2 sessions x {args.turns * 2} console turns")
    spent_us = sorted(v * 1e6 for v in SPENT)
    print(
        f"  time in the collection per turn: median {statistics.median(spent_us):.1f} µs "
        f"(max {spent_us[-1]:.1f} µs, n={len(spent_us)})"
    )
    print(
        f"  share of the turn time: {share * 100:.4f}% (target <= 1%: "
        f"{'met' if share <= 0.01 else 'NOT met'})"
    )
    on, off = statistics.median(runs["on"]), statistics.median(runs["off"])
    print(f"  per-turn on : {stats(runs['on'])}")
    print(f"  per-turn off: {stats(runs['off'])}")
    print(f"  median on / off = {on / off:.3f} (machine noise between sessions included)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--turns", type=int, default=10, help="turns of each kind per session")
    parser.add_argument(
        "--metrics", action="store_true", help="measure the cost of collecting turn metrics"
    )
    args = parser.parse_args()
    print(f"machine: {machine()}")
    if args.metrics:
        return metrics_overhead(args)
    results: dict[str, dict[str, list[float]]] = {
        "in-process": {"text": [], "tool": []},
        "console": {"text": [], "tool": []},
    }
    with llm_server_process(HOTEL_RULES) as base_url, tempfile.TemporaryDirectory() as tmp:
        os.environ.update(hotel_env(base_url))  # the in-process agent reads them like the child
        launch0 = AgentLaunch(HOTEL_AGENT, env=hotel_env(base_url))
        server = ForkServer.start(sys.executable, agent_env(launch0), agent=HOTEL_AGENT)
        launch = AgentLaunch(HOTEL_AGENT, env=hotel_env(base_url), launcher=server)
        agent_mod = load_agent_module()
        try:
            for _ in range(args.sessions):  # alternate, so machine noise hits both alike
                for name, run in (
                    ("in-process", lambda: in_process(agent_mod, args.turns)),
                    ("console", lambda: console(launch, args.turns, Path(tmp))),
                ):
                    got = asyncio.run(run())
                    for kind in ("text", "tool"):
                        results[name][kind] += got[kind]
        finally:
            server.close()
    print(
        f"\nper-turn time, {args.sessions} sessions x {args.turns * 2} turns "
        "(text and tool alternating), zero-latency scripted LLM"
    )
    for kind in ("text", "tool"):
        for name in ("in-process", "console"):
            print(f"  {kind:4s} {name:10s}: {stats(results[name][kind])}")
        ratio = statistics.median(results["console"][kind]) / statistics.median(
            results["in-process"][kind]
        )
        print(
            f"  {kind:4s} console / in-process = {ratio:.2f}x (target <= 1.25x: "
            f"{'met' if ratio <= 1.25 else 'NOT met'})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
