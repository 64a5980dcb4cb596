"""Benchmark (c): suite wall time through the real ``lkeval run`` at concurrency 1/2/4/8.

20 scripted scenarios x 3 turns against the example agent; every LLM answer (greeting and
turns) comes after 200 ms (rule ``delay: 0.2``), so a scenario holds 0.8 s of LLM time and the
suite 16 s. The ideal at concurrency c is ``16 s / c + one start``: the LLM time spread over c
agents plus the one-time cost of the framework import, which a cold run pays in its first
agent and a warm run in the fork server's preload (we use the cold start-to-ready measured in
the same run). Wall time is that of the whole ``lkeval run`` process; ``engine`` is the
results file's ``duration_seconds`` (without interpreter start-up and imports).

    python bench/suite_wall.py [--modes warm,cold] [--concurrency 1,2,4,8]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from _common import HOTEL_AGENT, ROOT, hotel_env, llm_server_process, machine

SCENARIOS, TURNS, DELAY = 20, 3, 0.2
LLM_SECONDS = SCENARIOS * (TURNS + 1) * DELAY  # a greeting and one answer per turn


def write_inputs(work: Path) -> tuple[Path, Path]:
    rules = work / "rules.yaml"
    rules.write_text(
        yaml.safe_dump(
            {
                "rules": [
                    {
                        "model": "hotel-agent",
                        "system": "Greet the guest",
                        "text": "Welcome!",
                        "delay": DELAY,
                    },
                    {"model": "hotel-agent", "text": "Noted: {last_user}", "delay": DELAY},
                ]
            }
        )
    )
    scenarios = work / "scenarios.yaml"
    scenarios.write_text(
        yaml.safe_dump(
            {
                "name": "Suite bench",
                "scenarios": [
                    {
                        "id": f"bench-{k:02d}",
                        "label": f"Scenario {k}",
                        "turns": [
                            {
                                "user": f"request {t} of scenario {k}",
                                "expect": [{"message": {"contains": "Noted"}}],
                            }
                            for t in range(TURNS)
                        ],
                    }
                    for k in range(SCENARIOS)
                ],
            },
            sort_keys=False,
        )
    )
    return rules, scenarios


def has_cold_start_flag() -> bool:
    out = subprocess.run(
        [sys.executable, "-m", "lkeval", "run", "--help"], capture_output=True, text=True, cwd=ROOT
    ).stdout
    return "--cold-start" in out


def run_suite(
    mode: str, concurrency: int, scenarios: Path, env: dict[str, str], work: Path, flag: bool
) -> dict[str, float]:
    results = work / f"{mode}-{concurrency}" / "results.json"
    args = [
        "run",
        "--agent",
        str(HOTEL_AGENT),
        "--scenarios",
        str(scenarios),
        "--results",
        str(results),
        "--concurrency",
        str(concurrency),
        "--comment",
        "off",
        "--no-github",
        "--repeat",  # one attempt each: the ideal counts one conversation per scenario
        "1",
    ]
    if mode == "cold" and flag:
        args.append("--cold-start")
    entry = ["-m", "lkeval"]
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, *entry, *args], env=env, capture_output=True, text=True, cwd=ROOT
    )
    wall = time.monotonic() - started
    if not results.is_file():
        raise RuntimeError(f"lkeval run failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    data = json.loads(results.read_text())
    boots = [
        a["boot_seconds"]
        for s in data["scenarios"]
        for a in s["attempts"]
        if a["boot_seconds"] is not None
    ]
    failed = [s for s in data["scenarios"] if s["status"] != "passed"]
    for s in failed:  # reported, not hidden: a wall time with failures is not comparable
        print(f"    ! {mode} c={concurrency}: {s['scenario_id']} {s['status']}: {s['reason']}")
    ready = re.search(r"fork server ready in ([0-9.]+)s", proc.stdout + proc.stderr)
    return {
        "wall": wall,
        "engine": data["metadata"]["duration_seconds"],
        "boot": statistics.median(boots),
        "failed": len(failed),
        "server": float(ready.group(1)) if ready else 0.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="warm,cold")
    parser.add_argument("--concurrency", default="1,2,4,8")
    parser.add_argument(
        "--one-start",
        type=float,
        default=None,
        help="seconds of one cold start (default: measured here, cold c=1 "
        "boot median, else a separate cold run at c=1)",
    )
    args = parser.parse_args()
    modes = args.modes.split(",")
    levels = [int(c) for c in args.concurrency.split(",")]
    print(f"machine: {machine()}")
    flag = has_cold_start_flag()
    if not flag:
        raise SystemExit("this lkeval run lacks --cold-start; warm and cold cannot be compared")
    rows: dict[tuple[str, int], dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rules, scenarios = write_inputs(work)
        with llm_server_process(rules) as base_url:
            env = {**os.environ, **hotel_env(base_url)}
            env.pop("GITHUB_ACTIONS", None)
            for concurrency in levels:
                for mode in modes:
                    rows[(mode, concurrency)] = run_suite(
                        mode, concurrency, scenarios, env, work, flag
                    )
                    r = rows[(mode, concurrency)]
                    print(
                        f"  {mode} c={concurrency}: wall {r['wall']:.2f}s engine "
                        f"{r['engine']:.2f}s boot median {r['boot'] * 1000:.0f} ms"
                        + (f", fork server ready in {r['server']:.1f}s" if r["server"] else "")
                        + (f", {r['failed']:.0f} FAILED" if r["failed"] else ""),
                        flush=True,
                    )
            one_start = args.one_start
            if one_start is None:
                if ("cold", 1) not in rows:
                    rows[("cold", 1)] = run_suite("cold", 1, scenarios, env, work, flag)
                one_start = rows[("cold", 1)]["boot"]
    print(
        f"\nsuite of {SCENARIOS} scenarios x {TURNS} turns, LLM answers after "
        f"{DELAY * 1000:.0f} ms: {LLM_SECONDS:.0f} s of LLM time; one start = "
        f"{one_start:.2f}s (cold start-to-connect)"
    )
    print(
        f"  {'mode':5s} {'c':>2s} {'ideal':>7s} {'wall':>7s} {'x ideal':>8s} "
        f"{'engine':>7s} {'x ideal':>8s}"
    )
    for (mode, concurrency), r in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        ideal = LLM_SECONDS / concurrency + one_start
        print(
            f"  {mode:5s} {concurrency:2d} {ideal:6.2f}s {r['wall']:6.2f}s "
            f"{r['wall'] / ideal:7.2f}x {r['engine']:6.2f}s {r['engine'] / ideal:7.2f}x"
        )
    if ("warm", 4) in rows:
        r = rows[("warm", 4)]
        ratio = r["wall"] / (LLM_SECONDS / 4 + one_start)
        print(
            f"  target: warm at c=4 within 1.15x of ideal: {ratio:.2f}x "
            f"({'met' if ratio <= 1.15 else 'NOT met'})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
