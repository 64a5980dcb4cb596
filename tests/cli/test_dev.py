"""``lkeval dev``'s command line: ``run``'s flags that apply in one interpreter, the settings
file's keys that apply, and one clear line when the agent cannot be imported here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import TEST_AGENTS

from lkeval.cli import build_parser, main, run_settings
from lkeval.cli.dev import DEV_RESULTS, dev_options
from lkeval.errors import ConfigError, ExitCode
from lkeval.inproc.loader import AgentImportError, load_server


def _scenarios(tmp_path: Path) -> Path:
    path = tmp_path / "scenarios.yaml"
    path.write_text("scenarios:\n  - label: Hi\n    turns:\n      - user: Hi\n", encoding="utf-8")
    return path


def test_an_agent_whose_imports_are_missing_here_is_one_line_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "out" / "results.json"
    agent = TEST_AGENTS / "import_error_agent.py"
    argv = ["dev", "--no-settings", "--agent", str(agent), "--scenarios", str(_scenarios(tmp_path))]
    code = main([*argv, "--results", str(results)])
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE
    assert "Traceback" not in err
    (line, *_) = err.splitlines()
    assert "cannot import 'lkeval_no_such_module'" in line
    assert "dev dependency" in line and "--python" in line  # the two ways out
    assert not results.exists()


def test_dev_takes_runs_flags_that_apply_in_one_interpreter() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    dev = sub.choices["dev"]  # type: ignore[index]
    flags = {f for a in dev._actions for f in a.option_strings}
    assert {"--agent", "--scenarios", "--match", "--tag", "--judge-model", "--junit"} <= flags
    assert not {"--python", "--cold-start", "--concurrency", "--cassettes", "--mode"} & flags
    assert not {"--shard", "--baseline", "--github", "--env"} & flags


def test_dev_plays_one_attempt_at_a_time_without_a_fork_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")  # a dev loop run in CI still posts nothing
    args = build_parser().parse_args(["dev", "--agent", "a.py", "--scenarios", "s.yaml"])
    options = dev_options(args)
    assert (options.repeat, options.concurrency, options.cold_start) == (1, 1, True)
    assert options.results == DEV_RESULTS
    assert options.report.github is False


def test_settings_apply_where_they_make_sense(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.lkeval]\nagent = "agent.py"\njudge-model = "gpt-4.1-mini"\n'
        'python = ".venv/bin/python"\nconcurrency = 3\ncold-start = true\n',
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    settings = run_settings(build_parser(), ["dev", "--scenarios", "s.yaml"])
    assert settings is not None
    flags = list(settings.flags)
    assert flags == ["--agent", "agent.py", "--judge-model", "gpt-4.1-mini"]  # no python
    run = run_settings(build_parser(), ["run", "--scenarios", "s.yaml"])
    assert run is not None and "--python" in run.flags  # run still takes them all


def test_an_unknown_setting_is_still_an_error_for_dev(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "lkeval.toml").write_text('judge-modle = "x"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="unknown setting 'judge-modle'"):
        run_settings(build_parser(), ["dev", "--scenarios", "s.yaml"])


def test_two_agent_modules_of_one_name_are_refused_not_confused(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "lkeval_twin_agent.py").write_text(
            "from livekit.agents import AgentServer\nserver = AgentServer()\n", encoding="utf-8"
        )
    try:
        load_server(tmp_path / "a" / "lkeval_twin_agent.py")
        with pytest.raises(ConfigError, match="already imported in this interpreter"):
            load_server(tmp_path / "b" / "lkeval_twin_agent.py")
    finally:
        sys.modules.pop("lkeval_twin_agent", None)


def test_without_livekit_agents_here_the_line_says_how_to_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = tmp_path / "lkeval_lonely_agent.py"
    agent.write_text("from livekit.agents import AgentServer\nserver = AgentServer()\n")
    monkeypatch.setitem(sys.modules, "livekit.agents.__main__", None)  # import fails as if gone
    with pytest.raises(AgentImportError) as raised:
        load_server(agent)
    line = str(raised.value)
    assert line.startswith("livekit-agents is not installed here") and "\n" not in line
    assert "dev dependency" in line and raised.value.exit_code == ExitCode.USAGE
