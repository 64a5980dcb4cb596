"""Run the example eval with no API key: a local LLM plays the agent's model, caller and judge.

    python examples/hotel/run_example.py [extra lkeval run flags]

Starts lk-eval's scripted OpenAI-compatible server on 127.0.0.1 with ``llm_rules.yaml``, points
the agent (OPENAI_BASE_URL) and lk-eval's caller and judge at it, and runs ``lkeval run`` on
``scenarios.yaml``. One scenario is meant to fail (the agent vetoes a booking under the wrong
name) and is quarantined by its ``flaky`` tag, so the gate passes while the report shows it.

The local models have no list price; the example prices them as gpt-4.1-mini (``--price``) so
the report shows costs. Run it twice to see the comparison with a baseline::

    python examples/hotel/run_example.py
    cp lkeval-results/results.json base.json
    python examples/hotel/run_example.py --baseline base.json --latency-regression 20%
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from lkeval.testing.llm_server import LLMServer

HERE = Path(__file__).resolve().parent


def main() -> int:
    with LLMServer.from_file(HERE / "llm_rules.yaml") as llm:
        env = {
            **os.environ,
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "not-needed-locally",
            "HOTEL_AGENT_MODEL": "hotel-agent",
        }
        cmd = [
            sys.executable,
            "-m",
            "lkeval",
            "run",
            "--agent",
            str(HERE / "agent.py"),
            "--scenarios",
            str(HERE / "scenarios.yaml"),
            "--results",
            "lkeval-results/results.json",
            "--junit",
            "lkeval-results/junit.xml",
            "--markdown",
            "lkeval-results/report.md",
            "--caller-model",
            "caller",
            "--judge-model",
            "judge",
            "--quarantine",
            "flaky=true",
            *("--price", "hotel-agent=0.4,1.6", "--price", "caller=0.4,1.6"),
            *("--price", "judge=0.4,1.6"),
            *sys.argv[1:],
        ]
        return subprocess.run(cmd, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
