"""End to end: a real pytest session (pytester, in a child process) plays the example agent's
scenarios in-process through lk-eval's pytest plugin, against the loopback LLM server.

The plugin is loaded as a user's pytest loads it, from lk-eval's ``pytest11`` entry point;
without it none of these sessions knows ``--lkeval-scenarios``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import HOTEL, TEST_AGENTS, hotel_env, run_argv, run_lkeval

from lkeval.results.results_json import load_results
from lkeval.results.wording import format_transcript
from lkeval.testing.llm_server import LLMServer

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.e2e

WRONG_ARGS = {
    "id": "SCN_wrongArgs",
    "label": "Wrong nights",
    "turns": [
        {
            "user": "Is a double room free?",
            "expect": [
                {"function_call": {"name": "check_availability", "arguments": {"nights": 3}}}
            ],
        }
    ],
}
SECRET = "sk-pytest-plugin-secret-0123456789"


@pytest.fixture
def hotel(
    pytester: pytest.Pytester, hotel_llm: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> pytest.Pytester:
    """A project holding the example's scripted scenarios and one that fails a check; the
    agent's, caller's and judge's LLM is the loopback server."""
    example = yaml.safe_load((HOTEL / "scenarios.yaml").read_text())
    scripted = [s for s in example["scenarios"] if "turns" in s]
    text = yaml.safe_dump({"name": "Hotel", "scenarios": [*scripted, WRONG_ARGS]}, sort_keys=False)
    pytester.makefile(".yaml", scenarios=text)
    for name, value in {
        "OPENAI_BASE_URL": hotel_llm.base_url,
        "OPENAI_API_KEY": SECRET,
        "HOTEL_AGENT_MODEL": "hotel-agent",
    }.items():
        monkeypatch.setenv(name, value)
    return pytester


def _options(agent: object = HOTEL / "agent.py") -> list[str]:
    return [
        "--lkeval-scenarios", "scenarios.yaml", "--lkeval-agent", str(agent),
        "--lkeval-run-args=--judge-model judge --caller-model caller",
        "-p", "no:cacheprovider",
    ]  # fmt: skip


def test_scenarios_pass_and_fail_with_a_readable_failure(hotel: pytest.Pytester) -> None:
    run = hotel.runpytest_subprocess("-v", *_options())
    out = run.stdout.str()
    run.stdout.fnmatch_lines(
        [
            "*scenarios.yaml::SCN_checkDouble01 PASSED*",
            "*scenarios.yaml::SCN_bookAda01 PASSED*",
            "*scenarios.yaml::SCN_vetoGrace01 FAILED*",
            "*scenarios.yaml::SCN_wrongArgs FAILED*",
        ]
    )
    assert run.ret == pytest.ExitCode.TESTS_FAILED
    # The veto: the agent's own on_simulation_end fails a scenario the checks passed.
    run.stdout.fnmatch_lines(
        [
            "*scenario SCN_vetoGrace01 (*scenarios.yaml:*) failed: agent veto: expected booking*",
            "transcript:",
            "*user: Please book it for Grace, two nights.",
            '*call book_room({"guest_name": "Ada"*',
        ]
    )
    # A failed check names the expectation, its line and what happened instead.
    run.stdout.fnmatch_lines(
        ["*scenario SCN_wrongArgs*failed*", "*expectation 1 (line *): *check_availability*"]
    )
    assert "Traceback" not in out and "lkeval/run/" not in out and "lkeval/inproc/" not in out
    assert SECRET not in out


def test_the_same_verdicts_and_transcripts_as_lkeval_run(
    hotel: pytest.Pytester, hotel_llm: LLMServer, tmp_path: Path
) -> None:
    # Parity: the same scenarios, the same scripted LLM, through lkeval run's agent processes
    # and through pytest in-process: each scenario's outcome, and a failed one's transcript.
    results_path = tmp_path / "results.json"
    argv = run_argv(HOTEL / "agent.py", hotel.path / "scenarios.yaml", results_path)
    console = run_lkeval([*argv, "--judge-model", "judge"], hotel_env(hotel_llm))
    assert console.returncode == 1, console.stdout + console.stderr
    by_id = {s.scenario_id: s for s in load_results(results_path).scenarios}
    out = hotel.runpytest_subprocess("-v", *_options()).stdout.str()
    for scenario_id, result in by_id.items():
        outcome = "PASSED" if result.status == "passed" else "FAILED"
        assert f"scenarios.yaml::{scenario_id} {outcome}" in out, scenario_id
    failed = {i for i, r in by_id.items() if r.status != "passed"}
    assert failed == {"SCN_vetoGrace01", "SCN_wrongArgs"}
    for scenario_id in failed:
        for line in format_transcript(by_id[scenario_id].attempts[0].transcript):
            assert line.splitlines()[0] in out, (scenario_id, line)


def test_k_selects_one_scenario(hotel: pytest.Pytester) -> None:
    run = hotel.runpytest_subprocess(*_options(), "-k", "checkDouble")
    run.assert_outcomes(passed=1, deselected=3)


def test_an_agent_that_cannot_be_imported_fails_with_the_reason(hotel: pytest.Pytester) -> None:
    run = hotel.runpytest_subprocess(
        *_options(TEST_AGENTS / "import_error_agent.py"), "-k", "checkDouble"
    )
    run.assert_outcomes(failed=1)
    run.stdout.fnmatch_lines(["*scenario SCN_checkDouble01*error*lkeval_no_such_module*"])


#: A test as LiveKit's testing guide writes one (its own AgentSession, RunResult.expect), with
#: lk-eval's fixtures: the scenario's simulation context, the simulated caller, the verdict.
FIXTURE_TESTS = textwrap.dedent(
    """
    import pytest
    from livekit.agents import AgentSession, get_job_context
    from livekit.plugins import openai

    from agent import Desk, FrontDeskAgent

    pytestmark = pytest.mark.anyio
    SIMULATED = "hotel-front-desk/guest-books-a-room-by-talking-to-the-desk"


    @pytest.fixture
    def anyio_backend():
        return "asyncio"


    def desk_session():
        return AgentSession(userdata=Desk(), llm=openai.LLM(model="hotel-agent"))


    @pytest.mark.lkeval_scenario("SCN_vetoGrace01")
    async def test_grace_is_vetoed(lkeval_simulation):
        sim = get_job_context().simulation_context()
        assert sim.userdata()["guest"] == "Grace"
        async with desk_session() as session:
            greeting = await session.start(FrontDeskAgent(), capture_run=True)
            greeting.expect.contains_message(role="assistant")
            result = await session.run(user_input="I'd like to book a double room.")
            result.expect.contains_function_call(name="transfer_to_booking")
            result = await session.run(user_input="Please book it for Grace, two nights.")
            result.expect.contains_function_call(name="book_room")
            verdict = await lkeval_simulation.verdict(session)
            assert await lkeval_simulation.verdict(session) is verdict  # the veto ran once
        print("VERDICT", verdict.passed, [v.source for v in verdict.verdicts])
        verdict.assert_passed()


    @pytest.mark.lkeval_scenario(SIMULATED)
    async def test_the_caller_books(lkeval_simulation, lkeval_caller):
        async with desk_session() as session:
            await session.start(FrontDeskAgent(), capture_run=True)  # its greeting said
            lines = []
            for _ in range(6):
                line = await lkeval_caller.next_line(session)
                if line is None:
                    break
                lines.append(line)
                await session.run(user_input=line)
            verdict = await lkeval_simulation.verdict(session)
        print("LINES", lines)
        print("VERDICT", verdict.passed, [(v.source, v.verdict) for v in verdict.verdicts])
        verdict.assert_passed()


    def test_unmarked(lkeval_simulation):
        pass
    """
)


def test_fixtures_give_a_guide_style_test_the_scenario(
    hotel: pytest.Pytester,
) -> None:
    # The project's ini names the scenarios, as docs/pytest.md shows: a run of one test file
    # then runs that file's tests only, the fixtures reading the scenarios from the ini.
    hotel.makefile(".yaml", scenarios=(HOTEL / "scenarios.yaml").read_text())
    hotel.makeini(
        f"[pytest]\npythonpath = {HOTEL}\nlkeval_scenarios = scenarios.yaml\n"
        f"lkeval_agent = {HOTEL / 'agent.py'}\n"
        "lkeval_run_args = --judge-model judge --caller-model caller\n"
    )
    hotel.makepyfile(test_desk=FIXTURE_TESTS)
    run = hotel.runpytest_subprocess("-s", "-v", "-p", "no:cacheprovider", "test_desk.py")
    out = run.stdout.str()
    run.assert_outcomes(passed=1, failed=1, errors=1)
    # The veto: the agent's on_simulation_end ran on the test's own session and failed it.
    assert "VERDICT False ['judge', 'agent']" in out
    run.stdout.fnmatch_lines(
        [
            "*scenario SCN_vetoGrace01*failed: agent veto fail: expected booking*Grace*",
            "*agent veto: fail — expected booking*Grace*",
            "transcript:",
            "*user: Please book it for Grace, two nights.",
        ]
    )
    # The simulated caller played the scenario's instructions; the judge and the agent passed it.
    run.stdout.fnmatch_lines(
        [
            "*LINES *Hi, is a double room free for two nights?*Great, I'd like to book it*",
            "VERDICT True *('judge', 'pass'), ('agent', 'pass')*",
        ]
    )
    run.stdout.fnmatch_lines(["*lk-eval: mark the test @pytest.mark.lkeval_scenario*"])
