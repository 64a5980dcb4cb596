"""A replay that diverges keeps no recorded verdict (issue 33.1's proof), through the real CLI
and real agent processes.

The example hotel agent, its ``book_room`` tool making the booking with a POST to a bookings
server, and its own veto (``on_simulation_end``) asking that server over HTTP whether the
booking is there. Recorded with a healthy agent; then the agent breaks: it stops making the
POST while its conversation stays exactly the same (the tool still says "Booked"). Live, its
veto fails. Replayed, ``auto`` and ``replay`` must not pass it: the calls after the missing
POST equal recorded ones, and the veto's GET would be answered with the booking the healthy
agent made, if a skipped call were not a divergence.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from conftest import HOTEL, hotel_env
from replay_agent import run_with_cassettes

from lkeval.testing.llm_server import LLMServer, QuietHTTPServer

pytestmark = pytest.mark.e2e

SCENARIOS = """\
name: Side effects
scenarios:
  - id: book-ada
    label: Books a room for Ada
    instructions: You are Ada. Book a double room for two nights.
    agent_expectations: The agent books a double room for Ada.
    userdata:
      guest: Ada
      expected_booking: {guest: Ada, room_type: double, nights: 2}
    turns:
      - user: I'd like to book a double room.
      - user: Please book it for Ada, two nights.
        expect:
          - contains: {function_call: {name: book_room, arguments: {guest_name: Ada}}}
"""
BOOK_OVER_HTTP = """\
    @function_tool
    async def book_room(
        self, context: RunContext[Desk], guest_name: str, room_type: str, nights: int
    ) -> str:
        \"\"\"Book a room for the guest.\"\"\"
        import aiohttp

        booking = {"guest": guest_name, "room_type": room_type, "nights": nights}
        if not os.environ.get("SKIP_THE_POST"):  # the regression under test
            async with aiohttp.ClientSession() as http:
                async with http.post(os.environ["BOOKINGS_URL"], json=booking) as resp:
                    resp.raise_for_status()
        return f"Booked a {room_type} room for {guest_name}, {nights} night(s)."


server = AgentServer()


async def check_bookings(sim: SimulationContext) -> None:
    \"\"\"The agent's own verdict: is the booking in the bookings server?\"\"\"
    import aiohttp

    expected = sim.userdata().get("expected_booking")
    async with aiohttp.ClientSession() as http:
        async with http.get(os.environ["BOOKINGS_URL"]) as resp:
            made = await resp.json()
    if expected not in made:
        sim.fail(f"expected booking {expected}, the bookings server has {made or 'none'}")


async def audit(ctx: JobContext) -> None:
    \"\"\"After the session: an audit record, the agent's last call.\"\"\"
    import aiohttp

    if os.environ.get("SKIP_THE_AUDIT"):  # the regression under test
        return
    async with aiohttp.ClientSession() as http:
        async with http.post(os.environ["BOOKINGS_URL"] + "/audit", json={"ended": True}):
            pass


"""


def _agent(directory: Path) -> Path:
    source = (HOTEL / "agent.py").read_text(encoding="utf-8")
    start = source.index("    @function_tool\n    async def book_room")
    end = source.index("@server.rtc_session(")
    path = directory / "agent.py"
    tail = source[end:].replace(
        "@server.rtc_session(on_simulation_end=check_bookings)",
        "@server.rtc_session(on_simulation_end=check_bookings, on_session_end=audit)",
    )
    assert "on_session_end=audit" in tail
    path.write_text(source[:start] + BOOK_OVER_HTTP + tail, encoding="utf-8")
    return path


@contextmanager
def _bookings(port: int) -> Iterator[tuple[str, list[Any], list[Any]]]:
    """A fresh bookings server (its URL, the bookings, the audit records): POST adds, GET
    lists the bookings."""
    made: list[Any] = []
    audits: list[Any] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            (audits if self.path.endswith("/audit") else made).append(body)
            self._answer({"ok": True})

        def do_GET(self) -> None:
            self._answer(made)

        def _answer(self, value: Any) -> None:
            body = json.dumps(value).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = QuietHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/bookings", made, audits
    finally:
        server.shutdown()
        server.server_close()


PORTS: list[int] = [0, 0]  # the recording's (a request is matched on its host and port)


def _run(
    tmp_path: Path, agent: Path, name: str, *flags: str, broken: bool, skip: str = "SKIP_THE_POST"
) -> Any:
    """One run with a fresh bookings server and cassettes in ``<name>-cassettes``, a copy of
    the recording's when there is one; ``broken``: with ``skip`` set. (The process, the one
    attempt, the audit records the server received.)"""
    llm_server = LLMServer.from_file(HOTEL / "llm_rules.yaml", port=PORTS[0])
    with llm_server as llm, _bookings(PORTS[1]) as (url, made, audits):
        PORTS[:] = [llm.port, int(url.split(":")[2].split("/")[0])]
        more = {skip: "1"} if broken else {}
        env = hotel_env(
            llm,
            BOOKINGS_URL=url,
            LKEVAL_CALLER_BASE_URL=llm.base_url,
            LKEVAL_JUDGE_BASE_URL=llm.base_url,
            **more,
        )
        cassettes = tmp_path / f"{name}-cassettes"
        if (tmp_path / "record-cassettes").is_dir() and name != "live":
            shutil.copytree(tmp_path / "record-cassettes", cassettes)
        proc, results = run_with_cassettes(
            tmp_path, agent, env, name, "--cold-start", *flags, cassettes=cassettes
        )
        assert bool(made) is not (broken and skip == "SKIP_THE_POST") or "replay" in flags
    assert results is not None, proc.stdout + proc.stderr
    (scenario,) = results["scenarios"]
    return proc, scenario["attempts"][-1], audits


def test_an_agent_that_stops_its_side_effect_never_passes_on_a_replay(tmp_path: Path) -> None:
    (tmp_path / "scenarios.yaml").write_text(SCENARIOS, encoding="utf-8")
    agent = _agent(tmp_path)
    proc, healthy, _ = _run(tmp_path, agent, "record", "--cassette-mode", "record", broken=False)
    assert proc.returncode == 0 and healthy["status"] == "passed", proc.stdout + proc.stderr
    recorded = json.loads((tmp_path / "record-cassettes" / "book-ada.json").read_text())
    posts = [x for x in recorded["exchanges"]["agent"] if x["request"]["method"] == "POST"]
    assert any(x["request"]["url"].endswith("/bookings") for x in posts), "the POST recorded"

    proc, live, _ = _run(tmp_path, agent, "live", broken=True)
    assert proc.returncode == 1 and live["status"] == "failed", live
    assert "the bookings server has none" in live["reason"], live["reason"]

    for mode in ("auto", "replay"):
        proc, again, _ = _run(tmp_path, agent, mode, "--cassette-mode", mode, broken=True)
        assert proc.returncode == 1 and again["status"] != "passed", (mode, again)
        assert "out of order" in again["replay"]["reason"], again["replay"]
        assert "/bookings) was not made before it" in again["replay"]["reason"]
        if mode == "auto":  # live from the divergence: the veto asked the real server
            assert again["status"] == "failed" and "bookings server has none" in again["reason"]


def test_a_call_the_recording_made_last_and_this_run_never_made_runs_the_attempt_again_live(
    tmp_path: Path,
) -> None:
    """The agent stops making its last call (``on_session_end``'s audit POST): everything
    before it replays, the recorded verdict too, and the leftover is found only at the end.
    ``auto`` keeps nothing of that replay: it runs the attempt again, every call live."""
    (tmp_path / "scenarios.yaml").write_text(SCENARIOS, encoding="utf-8")
    agent = _agent(tmp_path)
    proc, healthy, audits = _run(
        tmp_path, agent, "record", "--cassette-mode", "record", broken=False
    )
    assert proc.returncode == 0 and healthy["status"] == "passed", proc.stdout + proc.stderr
    recorded = json.loads((tmp_path / "record-cassettes" / "book-ada.json").read_text())
    last = recorded["exchanges"]["agent"][-1]["request"]
    assert audits and last["url"].endswith("/audit"), "on_session_end's POST was the last call"

    proc, again, _ = _run(tmp_path, agent, "auto", broken=True, skip="SKIP_THE_AUDIT")
    replay = again["replay"]
    assert replay["mode"] == "recorded" and replay["calls_replayed"] == 0, replay
    assert replay["reason"].startswith("replay miss at agent's call "), replay
    assert replay["reason"].endswith("more call(s) than this run made; run again live"), replay
    proc, missed, _ = _run(
        tmp_path, agent, "replay", "--cassette-mode", "replay", broken=True, skip="SKIP_THE_AUDIT"
    )
    assert proc.returncode == 1 and missed["status"] == "error", missed
    assert "more call(s) than this run made" in missed["reason"]
