"""End to end: latency and cost against a baseline, through the real CLI, agent and console.

The same example agent runs twice against the local LLM server: once as "main", then as a
"PR" whose LLM answers slower (the rule's ``delay``) and longer (more output tokens, so it
costs more). The second run's gate must fail on both regressions, each its own reason, with
the figures in the Action outputs, the annotations and the job summary.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import HOTEL, hotel_env, read_json, run_argv, run_lkeval

from lkeval.testing.llm_server import LLMServer

pytestmark = pytest.mark.e2e

TURNS = ("hello there", "what time is breakfast", "thanks, that is all")


def _scenarios(tmp_path: Path) -> Path:
    turns = [{"user": text, "expect": [{"message": {"contains": "Sure"}}]} for text in TURNS]
    scenarios = [{"id": f"SCN_chat{n}", "label": f"Small talk {n}", "turns": turns} for n in (1, 2)]
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"name": "Latency", "scenarios": scenarios}, sort_keys=False))
    return path


def _rules(delay: float, words: int) -> list[dict[str, object]]:
    reply = "Sure. " + "Breakfast is served from seven. " * words
    return [
        {"model": "hotel-agent", "system": "Greet the guest", "text": "Welcome!"},
        {"model": "hotel-agent", "text": reply, "delay": delay},
    ]


def _outputs(path: Path) -> dict[str, str]:
    """$GITHUB_OUTPUT as the runner reads it: name=value lines and name<<DELIM blocks."""
    found: dict[str, str] = {}
    lines = iter(path.read_text().splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            found[name] = "\n".join(iter(lambda: next(lines), delimiter))
        elif "=" in line:
            name, value = line.split("=", 1)
            found[name] = value
    return found


def test_a_slower_costlier_agent_fails_the_latency_and_cost_regression_budgets(
    tmp_path: Path,
) -> None:
    scenarios = _scenarios(tmp_path)
    price = ["--price", "hotel-agent=100,400"]  # the local model has no list price
    with LLMServer() as llm:
        llm.set_rules(_rules(delay=0.0, words=1))
        base = tmp_path / "main" / "results.json"
        first = run_lkeval([*run_argv(HOTEL / "agent.py", scenarios, base), *price], hotel_env(llm))
        assert first.returncode == 0, first.stdout + first.stderr

        llm.set_rules(_rules(delay=0.4, words=12))
        pr = tmp_path / "pr" / "results.json"
        github = {
            "GITHUB_ACTIONS": "true",
            "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
            "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
            "GITHUB_WORKSPACE": str(tmp_path),
        }
        flags = ["--baseline", str(base), "--latency-regression", "20%", "--cost-regression", "25%"]
        second = run_lkeval(
            [*run_argv(HOTEL / "agent.py", scenarios, pr), *price, *flags],
            hotel_env(llm, **github),
        )
    out = second.stdout + second.stderr
    assert second.returncode == 1, out

    # The metrics themselves, under LiveKit's names, and the agent's tokens priced per model.
    now = read_json(pr)
    turns = [t for s in now["scenarios"] for a in s["attempts"] for t in a["turns"]]
    assert len(turns) == 6 and all(t["latency_ms"] >= 400 for t in turns)
    assert all(t["llm_ttft_ms"] >= 400 for t in turns)  # the delay is before the first token
    agent = now["scenarios"][0]["attempts"][0]["usage"]["agent"]
    assert agent["models"] == ["hotel-agent"] and agent["cost_usd"] > 0

    # The gate: passing scenarios, two budget misses, each its own reason.
    gate_line = out.strip().splitlines()[-1]
    assert gate_line.startswith("lk-eval gate: FAILED (exit 1)"), gate_line
    assert "budget missed: suite p95" in gate_line and "--latency-regression 20%" in gate_line
    assert "budget missed: cost $" in gate_line and "--cost-regression 25%" in gate_line
    assert "failed or errored" not in gate_line  # every scenario passed
    assert "::error title=lk-eval%3A latency budget::suite p95" in second.stdout
    assert "::error title=lk-eval%3A cost budget::cost $" in second.stdout

    outputs = _outputs(tmp_path / "output.txt")
    assert outputs["gate"] == "fail" and outputs["failed"] == "0"
    assert float(outputs["latency-p95-delta-pct"]) > 20
    assert float(outputs["latency-p95-ms"]) >= 400
    assert float(outputs["cost-delta-usd"]) > 0 and float(outputs["cost-usd"]) > 0
    assert outputs["budget-misses"] == "2"
    assert [r for r in outputs["reasons"].splitlines() if r.startswith("budget missed")] == [
        r for r in gate_line.split(" — ", 1)[1].split("; ") if r.startswith("budget missed")
    ]

    summary = (tmp_path / "summary.md").read_text()
    assert "### ⏱️ Budget misses" in summary and "**vs baseline" in summary
    assert "xychart-beta" in summary
