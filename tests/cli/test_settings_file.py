"""``[tool.lkeval]`` in pyproject.toml and lkeval.toml: every ``run`` flag, the command line
wins, unknown keys are errors with file:line, the file is named."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lkeval.cli import build_parser, run_settings
from lkeval.cli.settings_file import find_settings_file, with_settings
from lkeval.errors import ConfigError

PYPROJECT = """\
[project]
name = "my-agent"

[tool.lkeval]
agent = "agent.py"
scenarios = ["a.yaml", "b.yaml"]
concurrency = 2
judge-model = "gpt-4.1-mini"
env = ["FROM_FILE=1"]
cold-start = true
"""


def parse(tmp: Path, argv: list[str]) -> argparse.Namespace:
    """What ``lkeval`` would parse in ``tmp`` (the settings found there put first)."""
    parser = build_parser()
    here = Path.cwd()
    os.chdir(tmp)
    try:
        return parser.parse_args(with_settings(argv, run_settings(parser, argv)))
    finally:
        os.chdir(here)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    return tmp_path


def test_the_file_sets_every_kind_of_flag(project: Path) -> None:
    args = parse(project, ["run"])
    assert args.agent == "agent.py"
    assert args.scenarios == ["a.yaml", "b.yaml"]
    assert args.concurrency == 2
    assert args.judge_model == "gpt-4.1-mini"
    assert args.cold_start is True


def test_the_command_line_wins(project: Path) -> None:
    args = parse(
        project,
        ["run", "--concurrency", "5", "--scenarios", "c.yaml", "--env", "FROM_CLI=1"],
    )
    assert args.concurrency == 5
    assert args.scenarios == ["c.yaml"]
    assert args.agent == "agent.py"  # what the command line does not say comes from the file
    # a repeatable flag adds to the file's values
    flags = ["--agent", "a", "--scenarios", "s", "--env", "FROM_FILE=1", "--env", "FROM_CLI=1"]
    both = parse(project, ["run", "--no-settings", *flags])
    assert args.env == both.env


def test_no_settings_ignores_the_file(project: Path) -> None:
    with pytest.raises(SystemExit):  # --agent and --scenarios are required again
        parse(project, ["run", "--no-settings"])


def test_other_commands_do_not_read_it(project: Path) -> None:
    (project / "pyproject.toml").write_text(PYPROJECT + "bogus = 1\n", encoding="utf-8")
    assert run_settings(build_parser(), ["validate", "a.yaml"]) is None


def test_an_unknown_key_names_file_line_and_the_near_miss(project: Path) -> None:
    text = PYPROJECT.replace("judge-model", "judge-modle")
    (project / "pyproject.toml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        parse(project, ["run"])
    assert str(caught.value) == (
        f"{project / 'pyproject.toml'}:8: unknown setting 'judge-modle' "
        "(did you mean 'judge-model'?)"
    )


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('github-token = "ghp_x"', "github-token: a token comes from the environment"),
        ("concurrency = [1, 2]", "concurrency: takes one value, got a list"),
        ("cold-start = 1", "cold-start: expected true or false, got 1"),
        ("concurrency = true", "concurrency: expected a string or a number, got True"),
        ("scenarios = []", "scenarios: an empty list sets nothing"),
    ],
)
def test_values_of_the_wrong_kind_are_errors(tmp_path: Path, line: str, says: str) -> None:
    (tmp_path / "lkeval.toml").write_text(f"\n{line}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"lkeval.toml:2: {says}"):
        parse(tmp_path, ["run"])


def test_underscores_read_as_dashes(tmp_path: Path) -> None:
    (tmp_path / "lkeval.toml").write_text(
        'agent = "a.py"\nscenarios = "s.yaml"\njudge_model = "m"\n', encoding="utf-8"
    )
    assert parse(tmp_path, ["run"]).judge_model == "m"


def test_which_file_applies(tmp_path: Path) -> None:
    sub = tmp_path / "agents" / "frontdesk"
    sub.mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    # a pyproject.toml without [tool.lkeval] on the way up is passed over
    (tmp_path / "agents" / "pyproject.toml").write_text('[project]\nname = "x"\n', "utf-8")
    assert find_settings_file(sub) == (tmp_path / "pyproject.toml", "[tool.lkeval]")
    # lkeval.toml beside a pyproject.toml wins
    (tmp_path / "lkeval.toml").write_text('agent = "a.py"\n', encoding="utf-8")
    assert find_settings_file(sub) == (tmp_path / "lkeval.toml", "lkeval.toml")


def test_relative_paths_are_the_files_own(project: Path) -> None:
    sub = project / "sub"
    sub.mkdir()
    args = parse(sub, ["run", "--results", "here.json"])
    assert args.agent == os.path.join("..", "agent.py")
    assert args.scenarios == [os.path.join("..", "a.yaml"), os.path.join("..", "b.yaml")]
    assert args.results == "here.json"  # the command line's paths stay the working directory's


def test_the_real_cli_names_the_file_and_fails_cleanly(project: Path) -> None:
    def lkeval(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "lkeval", *argv],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "GITHUB_ACTIONS": ""},
        )

    proc = lkeval("run")
    assert proc.returncode == 2, proc.stderr
    assert f"settings from {project / 'pyproject.toml'} [tool.lkeval]" in proc.stderr
    assert "--agent agent.py: no such file" in proc.stderr
    proc = lkeval("run", "--agent", "other.py")
    assert "--agent other.py: no such file" in proc.stderr  # the command line won
    (project / "pyproject.toml").write_text(PYPROJECT + "max-turn = 3\n", encoding="utf-8")
    proc = lkeval("run")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "pyproject.toml:11: unknown setting 'max-turn' (did you mean 'max-turns'?)" in (
        proc.stderr
    )
