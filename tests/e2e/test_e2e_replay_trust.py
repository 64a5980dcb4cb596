"""No file in a pull request's tree changes what its run replays (issue 33.2's proof), through
the real CLI, the Action's entrypoint and real agent processes.

Main records its cassettes with the healthy hotel agent and uploads them (with the manifest
lk-eval writes) as its artifact. A pull request breaks the agent (its availability tool says
the hotel is closed), renames the simulated scenario (``talk-and-book`` becomes
``talk-and-book-v2``, so main's artifact has no cassette of that name to overwrite it), and
commits ``lkeval-cassettes/talk-and-book-v2.json``, recorded on its broken agent with a judge
that passes everything. The real judge fails a closed hotel. Whether the pull request comes
from a fork (no secrets: only what replays from main's cassettes is evaluated) or from the
same repository (live LLM), through ``lkeval run --cassettes-from`` or the Action's
``cassettes-from: auto``, it gets no green: its committed cassette is never replayed.
"""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import HOTEL, clean_env, read_json
from github_server import FakeGitHub, github_server
from replay_agent import (
    SCENARIOS,
    Rooms,
    pull_request_env,
    replay_agent,
    run_entrypoint,
    run_with_cassettes,
)

from lkeval.testing.llm_server import LLMServer, QuietHTTPServer

pytestmark = pytest.mark.e2e

REPO = "octo/agent"
PR = 11
RENAMED = ("id: talk-and-book", "id: talk-and-book-v2")
#: The pull request's regression: the availability tool answers that the hotel is closed.
BROKEN = ('return f"{free} {room_type} room(s) free', 'return "Sorry, the hotel is closed"  # ')
#: The real judge fails a closed hotel (before the rule that passes everything else).
FAILS_CLOSED = """\
  - model: judge
    has_tool: submit_verdict
    last_user: "hotel is closed"
    tool_calls:
      - name: submit_verdict
        arguments: {reasoning: "The agent said the hotel is closed.", verdict: fail}
"""


@dataclass(frozen=True)
class World:
    """Main's recording and the pull request's tree, and where the servers must listen."""

    root: Path
    main_cassettes: Path
    pr_tree: Path
    ports: tuple[int, ...]
    real_rules: Path


def _rules(directory: Path) -> Path:
    """The hotel's LLM rules with a judge that fails a closed hotel (the real judge)."""
    text = (HOTEL / "llm_rules.yaml").read_text(encoding="utf-8")
    anchor = "  - model: judge\n    has_tool: submit_verdict\n    tool_calls:"
    assert anchor in text
    path = directory / "real_rules.yaml"
    path.write_text(text.replace(anchor, FAILS_CLOSED + anchor), encoding="utf-8")
    return path


@contextmanager
def _servers(rules: Path, ports: tuple[int, ...]) -> Iterator[dict[str, str]]:
    """The LLM server with ``rules`` and the rooms server; the environment pointing at them."""
    import threading

    rooms = QuietHTTPServer(("127.0.0.1", ports[1]), Rooms)
    threading.Thread(target=rooms.serve_forever, daemon=True).start()
    try:
        with LLMServer.from_file(rules, port=ports[0]) as llm:
            yield {
                "OPENAI_BASE_URL": llm.base_url,
                "LKEVAL_CALLER_BASE_URL": llm.base_url,
                "LKEVAL_JUDGE_BASE_URL": llm.base_url,
                "ROOMS_URL": f"http://127.0.0.1:{rooms.server_address[1]}/rooms",
                "HOTEL_AGENT_MODEL": "hotel-agent",
                "OPENAI_API_KEY": "test-key-not-secret",
            }
    finally:
        rooms.shutdown()
        rooms.server_close()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("trust")
    real = _rules(root)
    main = root / "main"
    main.mkdir()
    (main / "scenarios.yaml").write_text(SCENARIOS, encoding="utf-8")
    agent = replay_agent(main)
    with _servers(real, (0, 0)) as urls:
        ports = tuple(
            int(urls[k].split(":")[2].split("/")[0]) for k in ("OPENAI_BASE_URL", "ROOMS_URL")
        )
        proc, _ = run_with_cassettes(
            main, agent, clean_env(**urls), "record", "--cassette-mode", "record"
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the pull request: a broken agent, a renamed scenario, a cassette recorded on them with
    # a judge that passes everything (the example's own rules), committed in its tree
    tree = root / "pr"
    tree.mkdir()
    head, simulated = SCENARIOS.split("  - id: check-double")[0], SCENARIOS.split("\n  - ")[2]
    only = f"{head}  - {simulated}".replace(*RENAMED)  # the PR keeps only the renamed one
    (tree / "scenarios.yaml").write_text(only, encoding="utf-8")
    source = agent.read_text(encoding="utf-8")
    assert BROKEN[0] in source
    (tree / "agent.py").write_text(source.replace(*BROKEN), encoding="utf-8")
    with _servers(HOTEL / "llm_rules.yaml", ports) as urls:
        proc, _ = run_with_cassettes(
            tree,
            tree / "agent.py",
            clean_env(**urls),
            "forge",
            "--cassette-mode",
            "record",
            cassettes=tree / "lkeval-cassettes",
        )
    assert proc.returncode == 0, "the forged cassette passes: " + proc.stdout + proc.stderr
    assert (tree / "lkeval-cassettes" / "talk-and-book-v2.json").exists()
    for extra in ("_preflight.json", "_manifest.json"):  # the PR commits only its cassette
        (tree / "lkeval-cassettes" / extra).unlink(missing_ok=True)
    return World(root, main / "cassettes", tree, ports, real)


@pytest.fixture
def gh(world: World) -> Iterator[FakeGitHub]:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(world.main_cassettes.iterdir()):
            archive.writestr(path.name, path.read_bytes())
    with github_server() as server:
        server.add_run(artifacts={"lk-eval-cassettes": buffer.getvalue()}, repo=REPO)
        yield server


def _pr_env(directory: Path, gh: FakeGitHub, urls: dict[str, str], fork: bool) -> dict[str, str]:
    env = clean_env(**urls)
    if fork:
        env["OPENAI_API_KEY"] = ""  # `${{ secrets.OPENAI_API_KEY }}` on a fork
    head = "mallory/agent" if fork else REPO
    env.update(pull_request_env(directory, gh.base_url, gh.token, REPO, PR, head))
    return env


def _checkout(world: World, directory: Path) -> Path:
    workspace = directory / "workspace"
    shutil.copytree(world.pr_tree, workspace, ignore=shutil.ignore_patterns("forge"))
    return workspace


def _via_cli(workspace: Path, env: dict[str, str]) -> tuple[Any, Any]:
    return run_with_cassettes(
        workspace,
        workspace / "agent.py",
        env,
        "pr",
        "--cassettes-from",
        "github:",
        "--comment",
        "off",
        cassettes=workspace / "lkeval-cassettes",
        github=True,
    )


def _via_entrypoint(workspace: Path, env: dict[str, str]) -> tuple[Any, Any]:
    proc = run_entrypoint(workspace, env)
    path = workspace / "lkeval-results" / "results.json"
    return proc, (read_json(path) if path.exists() else None)


@pytest.mark.parametrize("through", ["cli", "entrypoint"])
@pytest.mark.parametrize("fork", [True, False], ids=["fork", "same-repo"])
def test_a_cassette_committed_under_a_renamed_id_gets_no_green(
    world: World, gh: FakeGitHub, tmp_path: Path, fork: bool, through: str
) -> None:
    workspace = _checkout(world, tmp_path)
    committed = (workspace / "lkeval-cassettes" / "talk-and-book-v2.json").read_bytes()
    run = _via_cli if through == "cli" else _via_entrypoint
    if fork:  # no server answers: nothing may go live
        proc, results = run(workspace, _pr_env(tmp_path, gh, _urls(world), fork))
    else:
        with _servers(world.real_rules, world.ports) as urls:
            proc, results = run(workspace, _pr_env(tmp_path, gh, urls, fork))
    out = proc.stdout + proc.stderr
    assert proc.returncode == (3 if fork else 1), out  # fork: nothing could be evaluated
    assert "gate=pass" not in (tmp_path / "output.txt").read_text(), out
    assert "not replayed (only what the restored artifact's manifest lists is)" in out, out
    (renamed,) = [s for s in results["scenarios"] if s["scenario_id"] == "talk-and-book-v2"]
    assert renamed["status"] != "passed", renamed
    (attempt,) = renamed["attempts"]
    assert attempt["replay"]["mode"] != "replayed", attempt["replay"]
    assert "talk-and-book-v2.json not replayed: it is not in the manifest of main run #" in (
        attempt["replay"]["reason"] if not fork else renamed["reason"]
    ), renamed
    if not fork:  # live, and the real judge failed it
        assert renamed["status"] == "failed", renamed
        written = workspace / "lkeval-cassettes" / "talk-and-book-v2.json"
        assert written.read_bytes() != committed, "re-recorded live"
    manifest = json.loads((world.main_cassettes / "_manifest.json").read_text())["cassettes"]
    assert sorted(manifest) == ["_preflight.json", "check-double.json", "talk-and-book.json"]


def _urls(world: World) -> dict[str, str]:
    base = f"http://127.0.0.1:{world.ports[0]}/v1"
    return {
        "OPENAI_BASE_URL": base,
        "LKEVAL_CALLER_BASE_URL": base,
        "LKEVAL_JUDGE_BASE_URL": base,
        "ROOMS_URL": f"http://127.0.0.1:{world.ports[1]}/rooms",
        "HOTEL_AGENT_MODEL": "hotel-agent",
    }
