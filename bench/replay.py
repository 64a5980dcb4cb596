"""Benchmark: record and replay (``--cassettes``), live against replayed, through ``lkeval run``.

20 scripted scenarios x 3 turns against the example agent; every LLM answer (greeting and
turns) comes after 1 s (rule ``delay: 1.0``), so a scenario holds 4 s of LLM time. Four runs
of the same suite, each timed as a whole ``lkeval run`` process, with the LLM server's request
count (the agent's calls: scripted scenarios use no caller or judge):

1. ``record``: all live, cassettes written;
2. ``auto``, nothing changed: every scenario should replay, with 0 LLM calls;
3. ``auto``, one scenario's second user turn changed: only that scenario should go live, from
   the call that differs;
4. ``replay`` with no key at all in the environment (the local reproduce recipe).

    python bench/replay.py [--concurrency 4] [--scenarios 20] [--delay 1.0]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from _common import HOTEL_AGENT, ROOT, hotel_env, machine

from lkeval.testing.llm_server import LLMServer

TURNS = 3


def write_inputs(work: Path, scenarios: int, delay: float, changed: int | None = None) -> Path:
    """The scenarios file; ``changed`` names the scenario whose second turn says otherwise."""
    suite = work / ("scenarios.yaml" if changed is None else "scenarios-changed.yaml")
    turns = {k: [f"request {t} of scenario {k}" for t in range(TURNS)] for k in range(scenarios)}
    if changed is not None:
        turns[changed][1] = f"a different request 1 of scenario {changed}"
    suite.write_text(
        yaml.safe_dump(
            {
                "name": "Replay bench",
                "scenarios": [
                    {
                        "id": f"bench-{k:02d}",
                        "label": f"Scenario {k}",
                        "turns": [
                            {"user": text, "expect": [{"message": {"contains": "Noted"}}]}
                            for text in turns[k]
                        ],
                    }
                    for k in range(scenarios)
                ],
            },
            sort_keys=False,
        )
    )
    return suite


def rules(work: Path, delay: float) -> Path:
    path = work / "rules.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "rules": [
                    {"system": "Greet the guest", "text": "Welcome!", "delay": delay},
                    {"text": "Noted: {last_user}", "delay": delay},
                ]
            }
        )
    )
    return path


def run(
    label: str,
    suite: Path,
    cassettes: Path,
    mode: str,
    env: dict[str, str],
    llm: LLMServer,
    work: Path,
    concurrency: int,
) -> dict[str, Any]:
    results = work / label / "results.json"
    before = len(llm.requests)
    args = [
        "run", "--agent", str(HOTEL_AGENT), "--scenarios", str(suite),
        "--results", str(results), "--concurrency", str(concurrency), "--comment", "off",
        "--no-github", "--repeat", "1", "--cassettes", str(cassettes), "--cassette-mode", mode,
    ]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "lkeval", *args], env=env, capture_output=True, text=True, cwd=ROOT
    )
    wall = time.monotonic() - started
    if not results.is_file():
        raise RuntimeError(f"lkeval run failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    data = json.loads(results.read_text())
    states: dict[str, int] = {}
    live: list[str] = []
    for scenario in data["scenarios"]:
        replay = (scenario["attempts"] or [{}])[0].get("replay") or {}
        state = replay.get("mode", "none")
        states[state] = states.get(state, 0) + 1
        if state != "replayed":
            live.append(f"{scenario['scenario_id']} ({state}: {replay.get('reason', '')[:80]})")
    passed = sum(1 for s in data["scenarios"] if s["status"] == "passed")
    return {
        "label": label,
        "wall": wall,
        "calls": len(llm.requests) - before,
        "states": states,
        "live": live,
        "passed": passed,
        "total": len(data["scenarios"]),
        "exit": proc.returncode,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--scenarios", type=int, default=20)
    parser.add_argument("--delay", type=float, default=1.0)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        suite = write_inputs(work, args.scenarios, args.delay)
        changed = write_inputs(work, args.scenarios, args.delay, changed=args.scenarios // 2)
        cassettes = work / "cassettes"
        with LLMServer.from_file(rules(work, args.delay)) as llm:
            env = {**os.environ, **hotel_env(llm.base_url)}
            env.pop("GITHUB_ACTIONS", None)
            keyless = {k: v for k, v in env.items() if not k.endswith(("_API_KEY", "_SECRET"))}
            plan = [
                ("record (live)", suite, "record", env),
                ("auto, nothing changed", suite, "auto", env),
                ("auto, one scenario changed", changed, "auto", env),
                ("replay, no keys", suite, "replay", keyless),
            ]
            for label, scenarios, mode, run_env in plan:
                row = run(label, scenarios, cassettes, mode, run_env, llm, work, args.concurrency)
                if set(row["states"]) == {"none"}:  # no attempt has a replay record
                    raise SystemExit("this lk-eval records no cassettes: nothing to compare")
                rows.append(row)
                print(
                    f"  {label:28s} wall {row['wall']:6.2f}s  LLM calls {row['calls']:4d}  "
                    f"{row['passed']}/{row['total']} passed  exit {row['exit']}  "
                    f"attempts: {row['states']}",
                    flush=True,
                )
                for line in row["live"][:3] if mode != "record" else []:
                    print(f"      live: {line}")
    live, same = rows[0], rows[1]
    print(
        f"\n{args.scenarios} scenarios x {TURNS} turns, every LLM answer after "
        f"{args.delay:g} s, --concurrency {args.concurrency}, warm starts"
    )
    print(
        f"  nothing changed: {live['wall'] / same['wall']:.1f}x faster than live "
        f"({live['wall']:.1f}s -> {same['wall']:.1f}s), LLM calls {live['calls']} -> "
        f"{same['calls']} (goal: >=10x, 0 calls)"
    )
    one = rows[2]
    print(
        f"  one changed: {len(one['live'])} scenario(s) went live, {one['calls']} LLM calls, "
        f"{one['wall']:.1f}s (goal: only that one)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
