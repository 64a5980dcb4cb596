"""Where a scenario's seconds go on the warm run path: the phases of every scenario of
benchmark (c)'s suite, timestamped inside one real ``lkeval run`` (issue 20.1).

The run is (c)'s (20 scripted scenarios x 3 turns, every LLM answer after 200 ms), in this
process, with the agent's and the conversation's methods wrapped to record when each began and
ended. Per scenario: ``prepare`` (spawn -> prepared: fork, import, server, entrypoint), the wait
for a conversation slot, ``connect`` ("go" -> the console dialled in), the greeting, each
turn, what follows the last turn until the agent is stopped (verdict asked, finalize, stop),
and, at c=1, the gap between one conversation's end and the next one's start; and the CPU
seconds the whole run took (lk-eval, its fork server and the agents), which bounds the wall
at higher concurrency on a small machine.

The run's tail (issue 20.4), from the last agent's stop: the engine's end (the last scenario's
result), the event loop closed (the evaluator's clients closed with it), the fork server
closed, the agents' logs published (masked), the results file written, the reports and the
gate line, and ``lkeval run``'s return. The process's own exit after that (``lkeval.cli.leave``
skips the interpreter's teardown) is ``bench/first_agent.py``'s "gate -> exit". And the
benchmark's own share of its wall, from its process's start: its imports, the inputs and the
scripted LLM's process before ``lkeval run`` is called, their clean-up after it returned. The
run is started as ``python -m lkeval`` starts it: its fork server first
(:mod:`lkeval.run.early_start`).

    python bench/run_phases.py [--concurrency 1]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import itertools
import os
import resource
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
from _common import HOTEL_AGENT, hotel_env, llm_server_process, machine
from suite_wall import write_inputs

#: (scenario, phase) -> [(began, ended)] in monotonic seconds
SPANS: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
#: the run's tail: step -> (began, ended) of its last call
TAIL: dict[str, tuple[float, float]] = {}


def _timed_tail(owner: Any, name: str, step: str) -> None:
    original = getattr(owner, name)
    if asyncio.iscoroutinefunction(original):

        @functools.wraps(original)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            began = time.monotonic()
            try:
                return await original(*args, **kwargs)
            finally:
                TAIL[step] = (began, time.monotonic())

    else:

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            began = time.monotonic()
            try:
                return original(*args, **kwargs)
            finally:
                TAIL[step] = (began, time.monotonic())

    setattr(owner, name, wrapper)


def _timed(cls: Any, name: str, phase: str, scenario: Callable[[Any], str]) -> None:
    original = getattr(cls, name)

    @functools.wraps(original)
    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        began = time.monotonic()
        try:
            return await original(self, *args, **kwargs)
        finally:
            SPANS[(scenario(self), phase)].append((began, time.monotonic()))

    setattr(cls, name, wrapper)


def instrument() -> None:
    from lkeval.agents.process import AgentProcess
    from lkeval.run.attempt import ScenarioAttempt
    from lkeval.run.conversation import Conversation

    def of_agent(agent: Any) -> str:
        return str(agent.log_path.stem)

    _timed(AgentProcess, "prepare", "prepare", of_agent)
    _timed(AgentProcess, "connect", "connect", of_agent)
    _timed(AgentProcess, "stop", "stop", of_agent)
    _timed(Conversation, "wait_for_greeting", "greeting", lambda c: of_agent(c.agent))
    _timed(Conversation, "turn", "turn", lambda c: of_agent(c.agent))
    _timed(Conversation, "finalize", "finalize", lambda c: of_agent(c.agent))
    _timed(ScenarioAttempt, "_run", "attempt", lambda a: str(a.log_path.stem))
    instrument_tail()


def instrument_tail() -> None:
    from lkeval.agents.fork_client import ForkServer
    from lkeval.cli.report import RunWriters
    from lkeval.run import suite
    from lkeval.run.engine import Engine
    from lkeval.run.interrupt import RunSignals

    _timed_tail(Engine, "run", "engine's end (last result)")
    _timed_tail(RunSignals, "run_until_signal", "event loop closed")
    _timed_tail(ForkServer, "close", "fork server closed")
    _timed_tail(suite, "publish_pending_logs", "agents' logs published (masked)")
    _timed_tail(suite.Suite, "_results", "results built (metadata, masked)")
    _timed_tail(suite.Suite, "metadata", "the run's metadata")
    _timed_tail(RunWriters, "write_results", "results file written")
    _timed_tail(RunWriters, "finish", "reports and gate line")
    _timed_tail(ForkServer, "wait_ready", "fork server ready")


def report_tail(last_stop: float, returned: float) -> None:
    """Each step of the tail: when it ended, and how long it took, from the last stop."""
    print(f"  the tail, from the last agent's stop ({returned - last_stop:.3f}s to the return):")
    steps = sorted(TAIL.items(), key=lambda item: item[1][1])
    for step, (began, ended) in steps:
        if ended < last_stop:
            continue
        print(f"    {step:46s} ends +{ended - last_stop:6.3f}s (took {ended - began:.3f}s)")
    print(f"    {'lkeval run returned':46s} ends +{returned - last_stop:6.3f}s")


def report_wall(marks: dict[str, float], first_go: float, last_stop: float) -> None:
    """The whole process's wall, from its start (the kernel's clock), in the run's order."""
    now_offset = time.time() - time.monotonic()  # monotonic -> the epoch
    born = psutil.Process().create_time()
    points = {
        **{name: at + now_offset - born for name, at in marks.items()},
        "fork server ready": TAIL["fork server ready"][1] + now_offset - born,
        "first go": first_go + now_offset - born,
        "last stop": last_stop + now_offset - born,
    }
    print("  the process's wall, from its start:")
    for name, at in sorted(points.items(), key=lambda item: item[1]):
        print(f"    {name:46s} at {at:6.2f}s")


def report(concurrency: int) -> tuple[float, float]:
    scenarios = sorted({s for s, _ in SPANS})

    def one(s: str, phase: str) -> tuple[float, float]:
        return SPANS[(s, phase)][0]

    rows: dict[str, list[float]] = defaultdict(list)
    conversations = []
    for s in scenarios:
        prep, conn = one(s, "prepare"), one(s, "connect")
        greet, turns = one(s, "greeting"), SPANS[(s, "turn")]
        stop = one(s, "stop")
        rows["prepare (spawn -> prepared)"].append(prep[1] - prep[0])
        rows["prepared -> go (waits for its slot)"].append(conn[0] - prep[1])
        rows["connect (go -> dialled in)"].append(conn[1] - conn[0])
        rows["greeting"].append(greet[1] - greet[0])
        rows["each turn"].extend(b - a for a, b in turns)
        rows["last turn -> stop begins (verdict, finalize)"].append(stop[0] - turns[-1][1])
        rows["stop"].append(stop[1] - stop[0])
        conversations.append((conn[0], stop[0]))
    conversations.sort()
    if concurrency == 1:
        rows["one conversation's end -> the next one's go"] = [
            max(0.0, b[0] - a[1]) for a, b in itertools.pairwise(conversations)
        ]
    first, last = conversations[0][0], max(e for _, e in conversations)
    print(f"c={concurrency}: {len(scenarios)} scenarios, first go -> last stop {last - first:.2f}s")
    print(f"  per scenario ({(last - first) / len(scenarios):.2f}s); medians (min-max):")
    for name, values in rows.items():
        print(
            f"    {name:46s} {statistics.median(values):6.3f}s "
            f"({min(values):.3f}-{max(values):.3f})"
        )
    return first, max(one(s, "stop")[1] for s in scenarios)


@contextlib.contextmanager
def suite_run(work: Path, scenarios: Path, concurrency: int) -> Iterator[list[str]]:
    """The arguments of an in-process ``lkeval run`` of ``scenarios`` (results under
    ``work/out``), while the scripted LLM of ``work/rules.yaml`` serves it and this process's
    environment points the agent at it."""
    with llm_server_process(work / "rules.yaml") as base_url:
        os.environ.update(hotel_env(base_url))
        os.environ.pop("GITHUB_ACTIONS", None)
        yield [
            "run", "--agent", str(HOTEL_AGENT), "--scenarios", str(scenarios),
            "--results", str(work / "out" / "results.json"), "--concurrency",
            str(concurrency), "--comment", "off", "--no-github", "--repeat", "1",
        ]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args()
    print(f"machine: {machine()}; load {os.getloadavg()[0]:.1f}")
    instrument()
    from lkeval.cli import main as lkeval_main
    from lkeval.run.early_start import EARLY

    marks: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        _, scenarios = write_inputs(work)
        with suite_run(work, scenarios, args.concurrency) as argv:
            marks["lkeval run called"] = time.monotonic()
            try:
                EARLY.begin(argv)
                code = lkeval_main(argv)
            finally:
                EARLY.end()
            returned = marks["lkeval run returned"] = time.monotonic()
    marks["the benchmark's clean-up done"] = time.monotonic()
    cpu = sum(
        getattr(resource.getrusage(who), field)
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        for field in ("ru_utime", "ru_stime")
    )  # lk-eval, its fork server and every agent (reaped by the fork server), not the LLM's
    print(f"lkeval exit {code}; load {os.getloadavg()[0]:.1f}; CPU {cpu:.1f} s in all")
    first_go, last_stop = report(args.concurrency)
    report_tail(last_stop, returned)
    report_wall(marks, first_go, last_stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
