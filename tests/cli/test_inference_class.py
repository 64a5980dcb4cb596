"""``--inference-class``: the LiveKit Inference class the agent's own calls run at, end to end.

Since livekit-agents 1.6.10 a text simulation's job pins every LiveKit Inference call to the low
class (``X-LiveKit-Inference-Priority: low``, merged after what the model asked for). The
scripted LLM server stands in for LiveKit Inference (``LIVEKIT_INFERENCE_URL``) and records the
header the agent really sends, for an agent whose model asks for ``priority``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import TEST_AGENTS, clean_env, read_json, run_argv, run_lkeval
from livekit.agents.job import JobContext

from lkeval.results.metrics import LOW_CLASS_NOTE
from lkeval.testing.llm_server import LLMServer

FRONTDESK = TEST_AGENTS / "frontdesk" / "agent.py"
PINS = isinstance(JobContext.__dict__.get("inference_headers"), property)  # livekit-agents>=1.6.10
PRIORITY = "x-livekit-inference-priority"


@pytest.fixture
def inference() -> Iterator[LLMServer]:
    with LLMServer.from_file(TEST_AGENTS / "frontdesk" / "llm_rules.yaml") as server:
        yield server


def _run(tmp_path: Path, llm: LLMServer, name: str, *flags: str) -> tuple[dict, str, str]:
    """One scripted booking scenario; (results.json, the Markdown report, stdout)."""
    scenarios = tmp_path / "scenarios.yaml"
    booking = {
        "id": "SCN_book",
        "label": "Book for Ada",
        "turns": [
            {
                "user": "please book for Ada",
                "expect": [{"function_call": {"name": "book_appointment"}}],
            }
        ],
    }
    scenarios.write_text(yaml.safe_dump({"name": "Front desk", "scenarios": [booking]}))
    out = tmp_path / name
    env = clean_env(
        LIVEKIT_INFERENCE_URL=llm.base_url,
        LIVEKIT_API_KEY="devkey",
        LIVEKIT_API_SECRET="devsecret-not-a-secret",
        FRONTDESK_INFERENCE_CLASS="priority",  # what the agent's model asks for
    )
    argv = [*run_argv(FRONTDESK, scenarios, out / "results.json"), "--no-github"]
    argv += ["--markdown", str(out / "report.md"), "--junit", str(out / "junit.xml")]
    argv += ["--max-latency", "p50=1ms", *flags]
    proc = run_lkeval(argv, env, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the 1 ms budget is always missed
    markdown = (out / "report.md").read_text(encoding="utf-8")
    return read_json(out / "results.json"), markdown, proc.stdout


def _sent(llm: LLMServer) -> set[str | None]:
    """The priority header of every agent request the server got."""
    return {r.headers.get(PRIORITY) for r in llm.requests}


def test_the_host_and_the_command_line_know_the_same_classes() -> None:
    # The host runs by path in the agent's interpreter and imports nothing from lk-eval.
    from lkeval import defaults
    from lkeval.host import agent_host

    assert agent_host.INFERENCE_CLASSES == defaults.INFERENCE_CLASSES
    assert defaults.INFERENCE_CLASS in defaults.INFERENCE_CLASSES


@pytest.mark.e2e
@pytest.mark.skipif(not PINS, reason="this livekit-agents does not pin text simulations")
def test_the_flag_decides_the_class_the_agents_calls_are_sent_at(
    tmp_path: Path, inference: LLMServer
) -> None:
    results, markdown, stdout = _run(tmp_path, inference, "low")
    assert _sent(inference) == {"low"}  # pinned, though the model asked for priority
    meta = results["metadata"]
    assert (meta["conversation_mode"], meta["inference_class"]) == ("text", "low")
    assert results["scenarios"][0]["attempts"][0]["inference_class"] == "low"
    assert "LiveKit Inference calls at the low class" in markdown
    assert LOW_CLASS_NOTE in stdout  # the budget miss says where it was measured
    assert LOW_CLASS_NOTE in markdown
    junit = (tmp_path / "low" / "junit.xml").read_text(encoding="utf-8")
    assert '<property name="lkeval.inference_class" value="low"' in junit

    sent_before = len(inference.requests)
    results, markdown, stdout = _run(
        tmp_path, inference, "agent", "--inference-class", "agent", "--cold-start"
    )
    agent_calls = inference.requests[sent_before:]
    assert agent_calls and {r.headers.get(PRIORITY) for r in agent_calls} == {"priority"}
    assert results["metadata"]["inference_class"] == "agent"
    assert results["scenarios"][0]["attempts"][0]["inference_class"] == "agent"
    assert "LiveKit Inference calls at the class the agent asks for" in markdown
    assert LOW_CLASS_NOTE not in stdout and LOW_CLASS_NOTE not in markdown
