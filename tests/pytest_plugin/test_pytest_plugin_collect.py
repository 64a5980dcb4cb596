"""The pytest plugin without playing anything: inert unless enabled, items, selection, errors.

Each test runs a real pytest session (pytester) in a fresh project, the plugin loaded the way a
user's pytest loads it: from lk-eval's ``pytest11`` entry point.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# Imported once here: pytester's in-process runs restore sys.modules after each run, and numpy
# (which the run flags import) loads only once a process.
import lkeval.pytest_plugin.collect  # noqa: F401

pytest_plugins = ["pytester"]

SCENARIOS = textwrap.dedent(
    """\
    name: Desk
    scenarios:
      - id: SCN_one
        label: Checks a double room
        instructions: Ask for a room.
        agent_expectations: It answers.
        tags: {feature: availability, skip: 'true'}
        turns:
          - user: Is a double room free?
      - id: SCN_two
        label: Books a room
        instructions: Book a room.
        agent_expectations: It books.
        tags: {feature: booking}
        turns:
          - user: Book it.
    """
)


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with a plain test, a scenarios file and an agent file."""
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    pytester.makefile(".yaml", scenarios=SCENARIOS)
    pytester.makepyfile(agent="# never imported while collecting\n")
    return pytester


ENABLED = ("--lkeval-scenarios", "scenarios.yaml", "--lkeval-agent", "agent.py")


def test_inert_without_a_scenarios_file(project: pytest.Pytester) -> None:
    # The scenarios file lies in the walked folder, yet without the option it is no test.
    run = project.runpytest("--collect-only", "-q")
    assert run.ret == 0
    assert [line for line in run.outlines if "::" in line] == ["test_plain.py::test_plain"]


def test_importing_the_plugin_loads_no_pipeline() -> None:
    # Every pytest run of every project with lk-eval installed imports the plugin.
    code = (
        "import sys, lkeval.pytest_plugin\n"
        "print(sorted(m for m in sys.modules if m.startswith(('livekit', 'lkeval.cli', "
        "'lkeval.scenarios', 'lkeval.llm', 'lkeval.run', 'yaml'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_each_scenario_is_an_item_named_by_its_id(project: pytest.Pytester) -> None:
    run = project.runpytest("--collect-only", "-q", *ENABLED)
    assert run.ret == 0, run.stdout.str()
    items = [line for line in run.outlines if "::" in line]
    assert items == [
        "scenarios.yaml::SCN_one",
        "scenarios.yaml::SCN_two",
        "test_plain.py::test_plain",
    ]


def _collected(run: pytest.RunResult) -> list[str]:
    return [line for line in run.outlines if "::" in line]


def test_the_option_adds_the_scenarios_file_to_any_run(project: pytest.Pytester) -> None:
    # The file lives outside the walked folder (testpaths): the option brings it in, also
    # when the run names other paths (a green CI line must not have played none of them).
    project.makeini("[pytest]\ntestpaths = tests\n")
    project.mkdir("tests").joinpath("test_x.py").write_text("def test_x():\n    pass\n")
    run = project.runpytest("--collect-only", "-q", *ENABLED)
    assert "scenarios.yaml::SCN_one" in _collected(run), run.stdout.str()
    named = project.runpytest("--collect-only", "-q", "tests", *ENABLED)
    assert _collected(named) == [
        "tests/test_x.py::test_x",
        "scenarios.yaml::SCN_one",
        "scenarios.yaml::SCN_two",
    ]


def test_the_ini_key_adds_it_only_to_a_run_that_names_no_paths(project: pytest.Pytester) -> None:
    project.makeini(
        "[pytest]\ntestpaths = tests\nlkeval_scenarios = scenarios.yaml\nlkeval_agent = agent.py\n"
    )
    project.mkdir("tests").joinpath("test_x.py").write_text("def test_x():\n    pass\n")
    run = project.runpytest("--collect-only", "-q")
    assert "scenarios.yaml::SCN_two" in _collected(run), run.stdout.str()
    named = project.runpytest("--collect-only", "-q", "tests")  # a unit run stays one
    assert _collected(named) == ["tests/test_x.py::test_x"]


def test_ini_keys_enable_it(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\nlkeval_scenarios = scenarios.yaml\nlkeval_agent = agent.py\n")
    run = project.runpytest("--collect-only", "-q")
    assert "scenarios.yaml::SCN_two" in run.outlines, run.stdout.str()


@pytest.mark.parametrize(
    ("selection", "selected"),
    [
        (("-k", "SCN_two"), ["scenarios.yaml::SCN_two"]),
        (("-k", "availability"), ["scenarios.yaml::SCN_one"]),
        (("-k", "Books"), ["scenarios.yaml::SCN_two"]),
        (("-m", "lkeval"), ["scenarios.yaml::SCN_one", "scenarios.yaml::SCN_two"]),
        (("-m", "lkeval(feature='booking')"), ["scenarios.yaml::SCN_two"]),
        (("-m", "lkeval_skip"), ["scenarios.yaml::SCN_one"]),
        (("-m", "not lkeval"), ["test_plain.py::test_plain"]),
    ],
)
def test_k_and_markers_select_scenarios(
    project: pytest.Pytester, selection: tuple[str, str], selected: list[str]
) -> None:
    run = project.runpytest("--collect-only", "-q", "--strict-markers", *ENABLED, *selection)
    assert [line for line in run.outlines if "::" in line] == selected, run.stdout.str()


def test_a_tag_never_becomes_pytests_own_marker(project: pytest.Pytester) -> None:
    # SCN_one's tag `skip: 'true'` must not skip it (a skipped scenario shows green).
    project.makeconftest(
        "def pytest_collection_finish(session):\n"
        "    for item in session.items:\n"
        "        print('MARKS', item.name, sorted(m.name for m in item.iter_markers()))\n"
    )
    run = project.runpytest("--collect-only", "-s", *ENABLED)
    assert "MARKS SCN_one ['lkeval', 'lkeval_feature', 'lkeval_skip']" in run.outlines


def test_a_bad_run_flag_is_a_collection_error_naming_it(project: pytest.Pytester) -> None:
    run = project.runpytest("--collect-only", *ENABLED, "--lkeval-run-args=--judge-modle x")
    assert run.ret == pytest.ExitCode.INTERRUPTED
    run.stdout.fnmatch_lines(["*lk-eval: lkeval run (pytest's lkeval_run_args): unrecognized*"])
    assert "Traceback" not in run.stdout.str()


def test_no_agent_is_a_clear_error(project: pytest.Pytester) -> None:
    run = project.runpytest("--collect-only", "--lkeval-scenarios", "scenarios.yaml")
    run.stdout.fnmatch_lines(["*lk-eval: no agent: give --lkeval-agent FILE*"])


def test_a_bad_scenarios_file_names_its_line(project: pytest.Pytester) -> None:
    project.makefile(".yaml", scenarios="scenarios:\n  - label: x\n    turns: 3\n")
    run = project.runpytest("--collect-only", *ENABLED)
    assert run.ret == pytest.ExitCode.INTERRUPTED
    run.stdout.fnmatch_lines(
        ["lk-eval: 1 error(s) in scenario files:", "*scenarios.yaml:3:12: error:*"]
    )


def test_a_missing_scenarios_file_is_a_usage_error(project: pytest.Pytester) -> None:
    run = project.runpytest("--lkeval-scenarios", "nope.yaml")
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    run.stderr.fnmatch_lines(["*lk-eval: scenarios file *nope.yaml: no such file*"])


def test_an_agent_without_a_scenarios_file_is_a_usage_error(project: pytest.Pytester) -> None:
    # Not silently inert: the user asked for something the plugin would not do.
    run = project.runpytest("--lkeval-agent", "agent.py")
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    run.stderr.fnmatch_lines(["*lk-eval: --lkeval-agent and --lkeval-run-args need a scenarios*"])


def test_the_settings_file_gives_the_agent(project: pytest.Pytester) -> None:
    # [tool.lkeval] is read as `lkeval run` reads it: its agent serves when no option names one.
    project.makefile(".toml", pyproject='[tool.lkeval]\nagent = "agent.py"\n')
    run = project.runpytest("--collect-only", "-q", "--lkeval-scenarios", "scenarios.yaml")
    assert "scenarios.yaml::SCN_one" in run.outlines, run.stdout.str()


def test_a_missing_judge_is_each_scenarios_one_line_failure(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SCN_simulated needs a caller and a judge; none is configured: no agent is imported, and
    # the test says what to set, in lkeval run's words, without a traceback.
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET"):
        monkeypatch.delenv(name, raising=False)
    project.makefile(
        ".yaml",
        scenarios="scenarios:\n  - id: SCN_simulated\n    label: Chat\n"
        "    instructions: Ask for a room.\n    agent_expectations: It answers.\n",
    )
    run = project.runpytest(*ENABLED, "-k", "SCN_simulated")
    run.assert_outcomes(failed=1)
    run.stdout.fnmatch_lines(["lk-eval: caller LLM *: set *"])
    assert "Traceback" not in run.stdout.str()


def test_secrets_are_masked_in_the_logs_pytest_shows(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The agent runs in pytest's process: its log records reach pytest's handlers, which
    # show them under a failed test and write them to log_file; its prints are captured.
    secret = "sk-agent-logs-this-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    project.makepyfile(
        test_logs="import logging, os\n"
        "def test_logs():\n"
        "    logging.getLogger('agent').warning('key is %s', os.environ['OPENAI_API_KEY'])\n"
        "    print('printed', os.environ['OPENAI_API_KEY'])\n"
        "    assert False\n"
    )
    run = project.runpytest(*ENABLED, "-k", "test_logs", "--log-file=run.log")
    run.assert_outcomes(failed=1)
    out = run.stdout.str()
    assert "key is " in out and "printed " in out and secret not in out
    written = (project.path / "run.log").read_text()
    assert "key is " in written and secret not in written


def test_the_scenario_fixture_reads_the_marked_scenario(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_fixture="import pytest\n"
        "@pytest.mark.lkeval_scenario('SCN_two')\n"
        "def test_two(lkeval_scenario):\n"
        "    assert lkeval_scenario.label == 'Books a room'\n"
        "@pytest.mark.lkeval_scenario('SCN_nope')\n"
        "def test_nope(lkeval_scenario):\n"
        "    pass\n"
    )
    run = project.runpytest("-o", "lkeval_scenarios=scenarios.yaml", "test_fixture.py")
    run.assert_outcomes(passed=1, errors=1)
    run.stdout.fnmatch_lines(["lk-eval: *scenarios.yaml: no scenario with id 'SCN_nope'"])
    # Without a scenarios file, the fixture says what to give.
    bare = project.runpytest("test_fixture.py", "-k", "two")
    bare.stdout.fnmatch_lines(["lk-eval: no scenarios file: give --lkeval-scenarios FILE*"])
