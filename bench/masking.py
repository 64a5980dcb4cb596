"""What the masking boundary costs: an agent log, a big report, one ``clip``.

Prints figures (no assertions): masking a 1 MiB agent log with 20 secrets (exact forms and
12-character fragments), rendering the Markdown and JUnit of a 300-scenario run with and
without secrets known to the process's one masker, and one ``clip`` call (the process masker
is built once; until lk-eval 0.1 each call re-read and sorted the environment).

    .venv/bin/python bench/masking.py
"""

from __future__ import annotations

import os
import random
import string
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from report_fixtures import results_of, scenario

from lkeval.reporters import JUnitReporter, MarkdownReporter, build_report
from lkeval.results.gate import evaluate_gate
from lkeval.text.masking import Masker, clip, register_secret, reset_process_masker


def best_of(runs: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    print(f"load average (1 min) at the start: {os.getloadavg()[0]:.1f}")
    rng = random.Random(1)
    secrets = ["".join(rng.choices(string.ascii_letters + string.digits, k=40)) for _ in range(20)]
    masker = Masker(secrets)
    log = "".join(rng.choices(string.ascii_letters + " \n", k=1 << 20))
    log = log[: 1 << 19] + secrets[3][:20] + log[1 << 19 :]
    print(f"mask a 1 MiB agent log, 20 secrets:      {best_of(3, lambda: masker.mask(log)):.3f} s")

    scenarios = [scenario(f"s{i}", "failed" if i % 3 == 0 else "passed") for i in range(300)]
    results = results_of(*scenarios)
    gate = evaluate_gate(results, None)
    for label, known in (("no secrets", []), ("20 secrets", secrets)):
        reset_process_masker()
        register_secret(*known)

        def render() -> None:
            report = build_report(results, None, gate)
            MarkdownReporter().format(report)
            JUnitReporter().format(report)

        print(f"Markdown + JUnit, 300 scenarios, {label}: {best_of(3, render):.3f} s")
    reset_process_masker()
    os.environ["BENCH_API_KEY"] = secrets[0]
    n = 2000
    per_call = best_of(3, lambda: [clip("some reason text " * 10, 120) for _ in range(n)]) / n
    print(f"clip() with the process masker:           {per_call * 1e6:.0f} µs per call")


if __name__ == "__main__":
    main()
