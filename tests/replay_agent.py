"""What the record/replay e2e tests share: the example hotel agent with its availability tool
asking a local rooms server over HTTP (aiohttp), the servers it needs, and one ``lkeval run``
with cassettes.

Used by tests/e2e/test_e2e_replay.py (record, stop every server, replay, edit, go live),
tests/e2e/test_e2e_replay_twenty.py (twenty replays, warm and cold) and
tests/e2e/test_e2e_replay_keyless.py (no keys: a laptop reproducing a CI failure, a fork's
pull request, the Action's container, another interpreter).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from fnmatch import fnmatch
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

from conftest import HOTEL, ROOT, hotel_env, read_json, run_argv, run_lkeval

from lkeval.testing.llm_server import LLMServer, QuietHTTPServer

SCENARIOS = """\
name: Hotel replay
scenarios:
  - id: check-double
    label: Checks double room availability
    instructions: You want to know whether a double room is free for two nights.
    agent_expectations: The agent checks availability and tells the guest.
    turns:
      - user: Is a double room free for two nights?
        expect:
          - function_call: {name: check_availability}
          - function_call_output: {is_error: false, output_contains: free}
  - id: talk-and-book
    label: Guest books a room by talking to the desk
    instructions: |
      You are Ada, calling Hotel Example. Ask whether a double room is free for two
      nights, then book it for yourself. Hang up once it is booked.
    agent_expectations: The agent checks availability and books a double room for Ada.
"""
TOOL_OVER_HTTP = """\
    @function_tool
    async def check_availability(self, room_type: str, nights: int) -> str:
        \"\"\"Check whether a room type is free for a number of nights.\"\"\"
        import aiohttp

        url = os.environ["ROOMS_URL"]
        async with aiohttp.ClientSession() as http:
            async with http.get(url, params={"type": room_type, "nights": nights}) as resp:
                free = (await resp.json())["free"]
        return f"{free} {room_type} room(s) free for {nights} night(s)"
"""


def replay_agent(directory: Path) -> Path:
    """The example agent with its availability tool asking the rooms server over HTTP."""
    source = (HOTEL / "agent.py").read_text(encoding="utf-8")
    start = source.index("    @function_tool\n    async def check_availability")
    end = source.index("    @function_tool\n    async def transfer_to_booking")
    path = directory / "agent.py"
    path.write_text(source[:start] + TOOL_OVER_HTTP + "\n" + source[end:], encoding="utf-8")
    return path


class Rooms(BaseHTTPRequestHandler):
    """The tool's server: says one room is free, and keeps what it was asked."""

    asked: ClassVar[list[str]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        Rooms.asked.append(self.path)
        body = json.dumps({"free": 1}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def servers(ports: tuple[int, int] = (0, 0)) -> Iterator[tuple[LLMServer, ThreadingHTTPServer]]:
    """The LLM server (agent, caller, judge) and the rooms server, stopped on exit."""
    rooms = QuietHTTPServer(("127.0.0.1", ports[1]), Rooms)
    threading.Thread(target=rooms.serve_forever, daemon=True).start()
    try:
        with LLMServer.from_file(HOTEL / "llm_rules.yaml", port=ports[0]) as llm:
            yield llm, rooms
    finally:
        rooms.shutdown()
        rooms.server_close()


def run_with_cassettes(
    tmp_path: Path,
    agent: Path,
    env: dict[str, str],
    name: str,
    *flags: str,
    scenarios: Path | None = None,
    cassettes: Path | None = None,
    github: bool = False,
    timeout: float = 240,
) -> Any:
    """``lkeval run`` with cassettes: (the process, its results.json or None)."""
    results = tmp_path / name / "results.json"
    argv = run_argv(agent, scenarios or tmp_path / "scenarios.yaml", results)
    argv += ["--caller-model", "caller", "--judge-model", "judge"]
    argv += [] if github else ["--no-github"]
    argv += ["--cassettes", str(cassettes or tmp_path / "cassettes"), *flags]
    proc = run_lkeval(argv, env, timeout=timeout, cwd=tmp_path)
    return proc, (read_json(results) if results.exists() else None)


def pull_request_env(
    directory: Path, api_url: str, token: str, repo: str, pr: int, head: str
) -> dict[str, str]:
    """A ``pull_request`` run's GitHub environment (its event written in ``directory``) for a
    pull request from ``head`` (another repository's name: a fork's) into ``repo``."""
    pull = {
        "number": pr,
        "head": {"sha": "f0f0f0", "repo": {"full_name": head, "fork": head != repo}},
        "base": {"repo": {"full_name": repo}},
    }
    event = directory / "event.json"
    event.write_text(json.dumps({"number": pr, "pull_request": pull}))
    return {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": repo,
        "GITHUB_SHA": "merge999",
        "GITHUB_RUN_ID": "1",
        "GITHUB_WORKFLOW_REF": f"{repo}/.github/workflows/eval.yml@refs/pull/{pr}/merge",
        "GITHUB_API_URL": api_url,
        "GITHUB_STEP_SUMMARY": str(directory / "summary.md"),
        "GITHUB_OUTPUT": str(directory / "output.txt"),
        "GITHUB_TOKEN": token,
        "LKEVAL_GITHUB_TIMEOUT": "5",
    }


#: The Action's inputs of the cassettes recipe (docs/action.md) for the hotel agent.
ACTION_INPUTS = {
    "agent": "agent.py",
    "scenarios": "scenarios.yaml",
    "install": "none",
    "caller-model": "caller",
    "judge-model": "judge",
    "repeat": "1",
    "cassettes": "lkeval-cassettes",
    "cassettes-from": "auto",
    "comment": "off",
}


def run_entrypoint(workspace: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``entrypoint.py`` as the container runs it in ``workspace``, with :data:`ACTION_INPUTS`."""
    env = {**env, **{f"INPUT_{k.upper()}": v for k, v in ACTION_INPUTS.items()}}
    env["GITHUB_WORKSPACE"] = str(workspace)
    return subprocess.run(
        [sys.executable, str(ROOT / "entrypoint.py")],
        env=env,
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def conversation(results: Any, ids: frozenset[str] | None = None) -> list[Any]:
    """What must be byte-identical: each attempt's transcript, checks, verdicts and status (of
    the scenarios ``ids`` only, if given)."""
    keep = ("status", "reason", "transcript", "expectations", "verdicts", "end_reason")
    scenarios = [s for s in results["scenarios"] if ids is None or s["scenario_id"] in ids]
    return [{k: a[k] for k in keep} for s in scenarios for a in s["attempts"]]


def replayed_ids(results: Any) -> frozenset[str]:
    """The scenarios a run played (a scenario not selected by ``--match`` has no attempt)."""
    return frozenset(s["scenario_id"] for s in results["scenarios"] if s["attempts"])


def replay_twenty(tmp_path: Path, runs: list[list[str]]) -> None:
    """Record 20 conversations (the agent's tool over HTTP, each judged), then replay them with
    each of ``runs``' flags and no server left to answer: every transcript, check, verdict and
    the exit code as recorded (of the scenarios a run's ``--match`` selects, all by default)."""
    one = SCENARIOS.split("  - id: talk-and-book")[0].split("scenarios:\n", 1)[1]
    copies = "".join(one.replace("id: check-double", f"id: check-{n:02d}") for n in range(20))
    (tmp_path / "scenarios.yaml").write_text(f"name: Twenty\nscenarios:\n{copies}")
    agent = replay_agent(tmp_path)
    with servers() as (llm, rooms):
        env = hotel_env(
            llm,
            ROOMS_URL=f"http://127.0.0.1:{rooms.server_address[1]}/rooms",
            LKEVAL_CALLER_BASE_URL=llm.base_url,
            LKEVAL_JUDGE_BASE_URL=llm.base_url,
        )
        recorded, first = run_with_cassettes(tmp_path, agent, env, "record", "--concurrency", "4")
        assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert len(conversation(first)) == 20
    assert all(a["verdicts"] for a in conversation(first)), "each one was judged"
    for flags in runs:
        # cold boots take ~2.5 s of CPU each, minutes on a loaded machine: the timeout only
        # guards against a hang, it is not a speed check.
        proc, again = run_with_cassettes(
            tmp_path,
            agent,
            env,
            "-".join(flags),
            "--cassette-mode",
            "replay",
            *flags,
            timeout=900 if "--cold-start" in flags else 240,
        )
        assert proc.returncode == recorded.returncode, proc.stdout + proc.stderr
        played = replayed_ids(again)
        globs = [flags[i + 1] for i, flag in enumerate(flags) if flag == "--match"] or ["*"]
        selected = {i for i in replayed_ids(first) if any(fnmatch(i, g) for g in globs)}
        assert played == selected and played, (flags, played)
        assert conversation(again) == conversation(first, played), flags
        modes = {a["replay"]["mode"] for s in again["scenarios"] for a in s["attempts"]}
        assert modes == {"replayed"}, flags
