"""Benchmark: audio mode (issue 34.4, 34.9): lk-eval's own CPU, first audio vs the agent's
e2e_latency, and the largest audio concurrency that keeps first audio near one call alone.

Each scenario is a call to the voice variant of the example agent
(``tests/agents/voice_hotel_agent.py``: LiveKit Inference STT/TTS, silero VAD and the local
turn detector) through the real ``lkeval run --mode audio --speech local`` (oracle STT, espeak
TTS; the local LLM answers at once): a greeting and ``TURNS`` spoken questions.

For each concurrency C (``--concurrency 1,2,3,4``) it runs C scenarios at once and prints:
- lk-eval's own CPU (the ``lkeval`` process alone: its event loop, the microphones and
  speakers, the local speech server it hosts; not the agents, not espeak) per second of
  conversation, as a share of one core (goal: at most 5%);
- first audio on the wire (caller's last sample -> agent's first audio frame) and the agent's
  own ``e2e_latency`` per turn: p50/p95 and their mean difference;
- first audio p95 as a multiple of C=1's (the largest C within 1.2x is the figure asked for).
The machine's load before and after each run is printed: on a shared machine every figure
is only as good as it.

    python bench/audio.py [--concurrency 1,2,3,4] [--turns 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import yaml
from _common import HOTEL_RULES, ROOT, hotel_env, llm_server_process, machine

VOICE_AGENT = ROOT / "tests" / "agents" / "voice_hotel_agent.py"
LINES = (
    "Is a double room free for two nights?",
    "Is a suite free tonight?",
    "Is a single room free for two nights?",
    "Thank you, goodbye.",
)


def write_scenarios(path: Path, count: int, turns: int) -> Path:
    scenarios = [
        {
            "id": f"SCN_audio{i}",
            "label": f"Audio call {i}",
            "turns": [
                {"user": line, "expect": [{"heard": {"max_wer": 0}}]} for line in LINES[:turns]
            ],
        }
        for i in range(count)
    ]
    path.write_text(yaml.safe_dump({"name": "Audio bench", "scenarios": scenarios}))
    return path


def own_cpu(pid: int, proc: subprocess.Popen[str]) -> float:
    """CPU seconds (user + system) of the process alone, sampled until it exits."""
    last = 0.0
    watched = psutil.Process(pid)
    while proc.poll() is None:
        try:
            times = watched.cpu_times()
            last = times.user + times.system
        except psutil.Error:
            break
        time.sleep(0.1)
    return last


def run(work: Path, llm: str, concurrency: int, turns: int) -> dict[str, object]:
    scenarios = write_scenarios(work / f"c{concurrency}.yaml", concurrency, turns)
    results = work / f"c{concurrency}" / "results.json"
    argv = [
        sys.executable, "-m", "lkeval", "run", "--agent", str(VOICE_AGENT),
        "--scenarios", str(scenarios), "--results", str(results), "--repeat", "1",
        "--mode", "audio", "--speech", "local", "--concurrency", str(concurrency),
    ]  # fmt: skip
    env = {**os.environ, **hotel_env(llm)}
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    cpu = own_cpu(proc.pid, proc)
    out = proc.communicate()[0]
    wall = time.monotonic() - started
    data = json.loads(results.read_text())
    attempts = [a for s in data["scenarios"] for a in s["attempts"]]
    bad = [(a["status"], a["reason"][:200]) for a in attempts if a["status"] != "passed"]
    conversation = sum(a["duration_seconds"] for a in attempts)
    audio = [t for a in attempts for t in a["turns"] if t["mode"] == "audio"]
    first = [t["first_audio_ms"] for t in audio if t["first_audio_ms"] is not None]
    e2e = [t["e2e_latency_ms"] for t in audio if t["e2e_latency_ms"] is not None]
    pairs = [
        t["e2e_latency_ms"] - t["first_audio_ms"]
        for t in audio
        if t["first_audio_ms"] is not None and t["e2e_latency_ms"] is not None
    ]
    return {
        "concurrency": concurrency,
        "wall_s": round(wall, 1),
        "lkeval_cpu_s": round(cpu, 2),
        "conversation_s": round(conversation, 1),
        "cpu_share": cpu / conversation if conversation else None,
        "first_audio": first,
        "e2e": e2e,
        "e2e_minus_first_ms": statistics.mean(pairs) if pairs else None,
        "load": (round(load_before, 2), round(os.getloadavg()[0], 2)),
        "stalls": sum((a.get("call") or {}).get("mic_stalls", 0) for a in attempts),
        "bad": bad,
        "tail": out.splitlines()[-3:] if bad else [],
    }


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,2,3,4")
    parser.add_argument("--turns", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    alone: float | None = None
    cpu_points: list[tuple[float, float]] = []  # (conversation s, lk-eval CPU s) per run
    with (
        tempfile.TemporaryDirectory(prefix="lkeval-audio-bench-") as tmp,
        llm_server_process(HOTEL_RULES) as llm,
    ):
        work = Path(tmp)
        for c in (int(x) for x in args.concurrency.split(",")):
            r = run(work, llm, c, args.turns)
            first, e2e = r["first_audio"], r["e2e"]
            assert isinstance(first, list) and isinstance(e2e, list)
            p95 = p(first, 0.95) if first else float("nan")
            alone = alone if alone is not None else p95
            share = r["cpu_share"]
            assert share is None or isinstance(share, float)
            cpu_points.append((float(r["conversation_s"]), float(r["lkeval_cpu_s"])))  # type: ignore[arg-type]
            print(
                f"C={c}: wall {r['wall_s']} s, lk-eval CPU {r['lkeval_cpu_s']} s over "
                f"{r['conversation_s']} s of conversation = "
                f"{(share or 0.0) * 100:.1f}% of one core per conversation-second; "
                f"load {r['load'][0]} -> {r['load'][1]}; mic stalls {r['stalls']}"  # type: ignore[index]
            )
            if first:
                print(
                    f"  first audio (wire) p50 {p(first, 0.5):.0f} ms p95 {p95:.0f} ms "
                    f"({p95 / alone:.2f}x C=1) | agent e2e_latency p50 "
                    f"{p(e2e, 0.5) if e2e else float('nan'):.0f} ms p95 "
                    f"{p(e2e, 0.95) if e2e else float('nan'):.0f} ms | e2e - first audio, mean "
                    f"{r['e2e_minus_first_ms'] or float('nan'):.0f} ms (n={len(first)})"
                )
            for status, reason in r["bad"]:  # type: ignore[attr-defined]
                print(f"  NOT PASSED: {status}: {reason}")
            for line in r["tail"]:  # type: ignore[attr-defined]
                print(f"  | {line}")
    if len(cpu_points) > 1:  # what one more conversation-second costs, start-up aside
        (conv0, cpu0), (conv1, cpu1) = cpu_points[0], cpu_points[-1]
        if conv1 > conv0:
            marginal = (cpu1 - cpu0) / (conv1 - conv0)
            print(
                f"lk-eval's marginal CPU: {marginal * 100:.1f}% of one core per conversation-second"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
