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

    python bench/run_phases.py [--concurrency 1]
"""

from __future__ import annotations

import argparse
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

from _common import HOTEL_AGENT, hotel_env, llm_server_process, machine
from suite_wall import write_inputs

#: (scenario, phase) -> [(began, ended)] in monotonic seconds
SPANS: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)


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


def report(concurrency: int) -> None:
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

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        _, scenarios = write_inputs(work)
        with suite_run(work, scenarios, args.concurrency) as argv:
            code = lkeval_main(argv)
    cpu = sum(
        getattr(resource.getrusage(who), field)
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        for field in ("ru_utime", "ru_stime")
    )  # lk-eval, its fork server and every agent (reaped by the fork server), not the LLM's
    print(f"lkeval exit {code}; load {os.getloadavg()[0]:.1f}; CPU {cpu:.1f} s in all")
    report(args.concurrency)
    return 0


if __name__ == "__main__":
    sys.exit(main())
