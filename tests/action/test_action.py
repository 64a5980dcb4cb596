"""The GitHub Action: action.yml, entrypoint.py, and the two run as the container runs them.

The runner starts the container with the workspace as working directory, every input as an
``INPUT_<NAME>`` variable (upper-cased, hyphens kept) and no arguments; these tests start
``python entrypoint.py`` the same way. Pure mapping tests call ``entrypoint.build_plan`` and
``entrypoint.install_plan`` directly; one end-to-end run boots the example agent.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from action_runner import legacy_markers, runner_commands
from conftest import HOTEL, ROOT, clean_env, fake_lkeval, hotel_env, read_json
from github_server import FakeGitHub, github_server
from report_fixtures import results_of, scenario, write_results

import lkeval
from lkeval.testing.llm_server import LLMServer
from lkeval_action.action_docs import COMMAND as DOCS_COMMAND
from lkeval_action.action_docs import render

ENTRYPOINT = ROOT / "entrypoint.py"
ACTION = ROOT / "action.yml"
DOCS = ROOT / "docs" / "action.md"
README = ROOT / "README.md"
REPO = "acme/hotel"
PR = 7


def load_entrypoint() -> ModuleType:
    """entrypoint.py as a module; its ``lkeval_action`` package sits beside it, as in /app."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    spec = importlib.util.spec_from_file_location("lkeval_entrypoint", ENTRYPOINT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    return module


ep = load_entrypoint()


def action() -> dict[str, Any]:
    data = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def inputs(**values: str) -> dict[str, str]:
    """``INPUT_*`` variables as the runner names them: ``caller_model`` → ``INPUT_CALLER-MODEL``."""
    return {"INPUT_" + name.replace("_", "-").upper(): value for name, value in values.items()}


def plan(**values: str) -> Any:
    values.setdefault("agent", "agent.py")
    values.setdefault("scenarios", "scenarios.yaml")
    return ep.build_plan(inputs(**values))


DEFAULT_ARGV = [
    "run",
    "--agent",
    "agent.py",
    "--scenarios",
    "scenarios.yaml",
    "--results",
    "lkeval-results/results.json",
    "--junit",
    "lkeval-results/junit.xml",
    "--fail-on",
    "any",
    "--comment",
    "update",
    "--comment-id",
    "default",
    "--summary",
]


def run_entrypoint(
    env: dict[str, str], cwd: Path, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python entrypoint.py`` as the container's ENTRYPOINT runs it."""
    return subprocess.run(
        [sys.executable, str(ENTRYPOINT), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def read_outputs(path: Path) -> dict[str, str]:
    """``$GITHUB_OUTPUT`` as the runner reads it: ``name=value`` and ``name<<DELIM`` blocks."""
    values: dict[str, str] = {}
    lines = iter(path.read_text(encoding="utf-8").splitlines())
    for line in lines:
        if "<<" in line and "=" not in line.split("<<", 1)[0]:
            name, delimiter = line.split("<<", 1)
            body = []
            for inner in lines:
                if inner == delimiter:
                    break
                body.append(inner)
            values[name] = "\n".join(body)
        else:
            name, value = line.split("=", 1)
            values[name] = value
    return values


# --- inputs → lkeval's command line ---------------------------------------------------------------

#: One sample value per input and what it must become; every input of action.yml is here.
MAPPING: dict[str, tuple[str, list[str]]] = {
    "agent": ("bot/agent.py", ["--agent", "bot/agent.py"]),
    "scenarios": ("a.yaml\nb.yaml c.yaml\n", ["--scenarios", "a.yaml", "b.yaml", "c.yaml"]),
    "caller-model": ("gpt-4.1-mini", ["--caller-model", "gpt-4.1-mini"]),
    "caller-base-url": ("http://ollama:11434/v1", ["--caller-base-url", "http://ollama:11434/v1"]),
    "judge-model": ("openai/gpt-4.1", ["--judge-model", "openai/gpt-4.1"]),
    "judge-base-url": ("livekit", ["--judge-base-url", "livekit"]),
    "judges": ("safety, tool_use\nhandoff", ["--judges", "safety,tool_use,handoff"]),
    "rejudge": ("2", ["--rejudge", "2"]),
    "maybe-is-pass": ("true", ["--maybe-is-pass"]),
    "allow-weak-judge": ("true", ["--allow-weak-judge"]),
    "repeat": ("3", ["--repeat", "3"]),
    "min-pass": ("2", ["--min-pass", "2"]),
    "concurrency": ("4", ["--concurrency", "4"]),
    "max-turns": ("8", ["--max-turns", "8"]),
    "boot-timeout": ("90", ["--boot-timeout", "90"]),
    "turn-timeout": ("45.5", ["--turn-timeout", "45.5"]),
    "mode": ("audio", ["--mode", "audio"]),
    "speech": ("local", ["--speech", "local"]),
    "voice": ("espeak:en-gb", ["--voice", "espeak:en-gb"]),
    "impair": ("loss=3%", ["--impair", "loss=3%"]),
    "shard": ("2/3", ["--shard", "2/3"]),
    "tag": ("feature=booking\ndifficulty=2", ["--tag", "feature=booking", "--tag", "difficulty=2"]),
    "match": ("SCN_book* 'Guest books*'", ["--match", "SCN_book*", "--match", "Guest books*"]),
    "quarantine": ("flaky=true", ["--quarantine", "flaky=true"]),
    "cassettes": ("evals/cassettes", ["--cassettes", "evals/cassettes"]),
    "cassette-mode": ("record", ["--cassette-mode", "record"]),
    "cassettes-from": ("auto", ["--cassettes-from", "github:"]),
    "results": ("out/r.json", ["--results", "out/r.json"]),
    "junit": ("out/j.xml", ["--junit", "out/j.xml"]),
    "markdown": ("out/report.md", ["--markdown", "out/report.md"]),
    "baseline": ("main/results.json", ["--baseline", "main/results.json"]),
    "baseline-artifact": ("lkeval-merged", ["--baseline-artifact", "lkeval-merged"]),
    "fail-on": ("regression", ["--fail-on", "regression"]),
    "min-pass-rate": ("90%", ["--min-pass-rate", "90%"]),
    "comment": ("new", ["--comment", "new"]),
    "comment-id": ("voice", ["--comment-id", "voice"]),
    "title": ("Voice evals", ["--title", "Voice evals"]),
    "comment-author": ("eval-app[bot]", ["--comment-author", "eval-app[bot]"]),
    "summary": ("false", ["--no-summary"]),
    "pr": ("42", ["--pr", "42"]),
    "extra-args": (
        "--llm-timeout 30 --env 'GREETING=hi there'",
        ["--llm-timeout", "30", "--env", "GREETING=hi there"],
    ),
}
#: Inputs that steer the entrypoint itself rather than becoming lkeval options.
NOT_ARGV = {"command", "working-directory", "install", "github-token"}


def test_every_input_has_a_mapping_test() -> None:
    assert set(MAPPING) | NOT_ARGV == set(action()["inputs"])


@pytest.mark.parametrize("name", sorted(MAPPING))
def test_input_maps_to_lkeval_arguments(name: str) -> None:
    value, expected = MAPPING[name]
    argv = list(plan(**{name.replace("-", "_"): value}).argv)
    n = len(expected)
    assert any(argv[i : i + n] == expected for i in range(len(argv))), argv


@pytest.mark.parametrize(
    ("value", "argument"),
    [("auto", "github:"), ("github:release/2", "github:release/2"), ("base.json", "base.json")],
)
def test_baseline_auto_is_the_default_branch(value: str, argument: str) -> None:
    argv = list(plan(baseline=value).argv)
    assert argv[argv.index("--baseline") + 1] == argument
    report = list(ep.build_plan(inputs(command="report", results="r.json", baseline=value)).argv)
    assert report[report.index("--baseline") + 1] == argument


def test_defaults_give_the_documented_command_line() -> None:
    result = plan()
    assert list(result.argv) == DEFAULT_ARGV
    assert (result.command, result.working_directory, result.install) == ("run", ".", "auto")
    assert result.env == {}


def test_inputs_keep_the_order_of_the_table_and_extra_args_come_last() -> None:
    argv = list(plan(extra_args="--rejudge 1", repeat="2", tag="a=b").argv)
    assert argv.index("--repeat") < argv.index("--tag") < argv.index("--results")
    assert argv[-2:] == ["--rejudge", "1"]


def test_empty_inputs_add_nothing_and_an_empty_junit_turns_it_off() -> None:
    argv = plan(junit="", comment_id="", repeat="  ", tag="\n").argv
    assert "--junit" not in argv and "--comment-id" not in argv
    assert "--repeat" not in argv and "--tag" not in argv


def test_github_token_goes_to_the_environment_never_to_argv() -> None:
    result = plan(github_token="ghs_secret_token_value")
    assert result.env == {"GITHUB_TOKEN": "ghs_secret_token_value"}
    assert not any("ghs_" in arg for arg in result.argv)


def test_settings_are_read_by_the_plan() -> None:
    result = plan(working_directory="services/agent", install="make deps", command="run")
    assert (result.working_directory, result.install) == ("services/agent", "make deps")


def test_action_environment_drops_the_inputs() -> None:
    env = ep.action_environment(
        {"PATH": "/bin", "INPUT_GITHUB-TOKEN": "x", "INPUT_AGENT": "a"}, {"GITHUB_TOKEN": "x"}
    )
    assert env == {"PATH": "/bin", "GITHUB_TOKEN": "x", "PYTHONDONTWRITEBYTECODE": "1"}


@pytest.mark.parametrize("name", ["maybe-is-pass", "allow-weak-judge", "summary"])
@pytest.mark.parametrize("value", ["yes", "1", "on", "", "ture"])
def test_booleans_are_true_or_false_only(name: str, value: str) -> None:
    with pytest.raises(ep.InputError, match=f"input `{name}`: must be true or false"):
        plan(**{name.replace("-", "_"): value})


@pytest.mark.parametrize("value", ["true", "True", "TRUE", "false", "False", "FALSE"])
def test_booleans_accept_the_yaml_spellings(value: str) -> None:
    argv = plan(maybe_is_pass=value).argv
    assert ("--maybe-is-pass" in argv) == (value.lower() == "true")


FLAG_INPUTS = sorted(
    set(action()["inputs"])
    - {"extra-args", "maybe-is-pass", "allow-weak-judge", "summary", "command"}
)


@pytest.mark.parametrize("name", FLAG_INPUTS)
def test_a_value_that_looks_like_a_flag_is_refused(name: str) -> None:
    with pytest.raises(ep.InputError, match=f"input `{name}`: '--python' looks like"):
        plan(**{name.replace("-", "_"): "--python"})


@pytest.mark.parametrize("name", ["scenarios", "tag", "match", "quarantine", "judges"])
def test_no_item_of_a_list_may_look_like_a_flag(name: str) -> None:
    with pytest.raises(ep.InputError, match=f"input `{name}`: '-x' looks like"):
        plan(**{name.replace("-", "_"): "a=b\n-x"})


def test_extra_args_may_hold_flags() -> None:
    assert list(plan(extra_args="--python /usr/bin/python3").argv)[-2:] == [
        "--python",
        "/usr/bin/python3",
    ]


def test_unbalanced_quotes_name_the_input() -> None:
    with pytest.raises(ep.InputError, match="input `match`: No closing quotation"):
        plan(match="'SCN_*")


@pytest.mark.parametrize("name", ["agent", "scenarios"])
def test_run_leaves_agent_and_scenarios_to_lkeval(name: str) -> None:
    # `lkeval run` may find them in [tool.lkeval] (pyproject.toml) or lkeval.toml; when
    # neither names them, lkeval itself says so, naming the input (the test below)
    values = {"agent": "agent.py", "scenarios": "s.yaml"}
    del values[name]
    assert f"--{name}" not in ep.build_plan(inputs(**values)).argv


def test_report_command_needs_no_agent_and_takes_the_report_inputs() -> None:
    result = ep.build_plan(inputs(command="report", results="r.json", pr="12", summary="false"))
    assert result.command == "report"
    assert list(result.argv) == [
        "report",
        "--results",
        "r.json",
        "--junit",
        "lkeval-results/junit.xml",
        "--fail-on",
        "any",
        "--comment",
        "update",
        "--comment-id",
        "default",
        "--no-summary",
        "--pr",
        "12",
    ]


@pytest.mark.parametrize("name", ["agent", "repeat", "install", "maybe-is-pass"])
def test_report_command_refuses_inputs_of_run(name: str) -> None:
    value = "true" if name == "maybe-is-pass" else "x"
    applies = "run or calibrate" if name == "maybe-is-pass" else "run"
    with pytest.raises(ep.InputError, match=f"input `{name}`: applies to command: {applies} only"):
        ep.build_plan(inputs(command="report", **{name.replace("-", "_"): value}))


def test_calibrate_command_takes_the_judge_scenarios_and_results_only() -> None:
    """``command: calibrate`` becomes ``lkeval calibrate`` with the judge, the scenarios, the
    results file (written back in place) and extra-args; the report inputs' defaults (JUnit,
    comment...) are not passed, and setting one, or an agent, is refused by name."""
    result = ep.build_plan(
        inputs(
            command="calibrate",
            scenarios="evals/a.yaml evals/b.yaml",
            judge_model="gpt-4.1-mini",
            results="eval-results/results.json",
            extra_args="--votes 5",
        )
    )
    assert result.command == "calibrate"
    assert list(result.argv) == [
        "calibrate",
        "--scenarios",
        "evals/a.yaml",
        "evals/b.yaml",
        "--judge-model",
        "gpt-4.1-mini",
        "--results",
        "eval-results/results.json",
        "--votes",
        "5",
    ]
    assert result.outputs == ("eval-results/results.json",)  # handed back; no JUnit listed
    assert result.env == {}  # the runner's token (always set) is not handed to calibrate
    token = inputs(command="calibrate", scenarios="s.yaml", github_token="ghs_runner")
    assert "GITHUB_TOKEN" not in ep.build_plan(token).env
    for name, value in (("agent", "agent.py"), ("junit", "j.xml"), ("comment", "off")):
        with pytest.raises(ep.InputError, match=f"input `{name}`: applies to command: run"):
            ep.build_plan(inputs(command="calibrate", scenarios="s.yaml", **{name: value}))
    with pytest.raises(ep.InputError, match="input `scenarios`: required with command: calibrate"):
        ep.build_plan(inputs(command="calibrate", scenarios=""))


def test_unknown_command() -> None:
    with pytest.raises(ep.InputError, match="input `command`: must be run, report or calibrate"):
        plan(command="merge")


# --- installing the agent's dependencies -------------------------------------------------------


PIP = ("/py", "-m", "pip", "install", "--no-warn-script-location")


def install(tmp_path: Path, spec: str = "auto", uv: str | None = "/usr/bin/uv") -> Any:
    return ep.install_plan(spec, tmp_path, python="/py", uv=uv)


def test_install_uv_lock_exports_the_locked_versions_and_installs_them(tmp_path: Path) -> None:
    for name in ("uv.lock", "requirements.txt", "pyproject.toml"):
        (tmp_path / name).write_text("")
    result = install(tmp_path)
    assert result.what == "uv.lock"
    assert result.commands == (
        (
            "/usr/bin/uv",
            "export",
            "--frozen",
            "--no-hashes",
            "--no-dev",
            "--no-editable",
            "--quiet",
            "--output-file",
            "lkeval-uv-export.txt",
        ),
        (
            "/usr/bin/uv",
            "pip",
            "install",
            "--python",
            "/py",
            "--requirement",
            "lkeval-uv-export.txt",
        ),
    )


def test_install_uv_lock_without_uv_falls_back_to_pip_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "uv.lock").write_text("")
    (tmp_path / "pyproject.toml").write_text("")
    result = install(tmp_path, uv=None)
    assert result.commands == ((*PIP, "."),)
    assert result.notice and "uv is not installed" in result.notice


def test_install_requirements_before_pyproject(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("")
    (tmp_path / "pyproject.toml").write_text("")
    result = install(tmp_path)
    assert (result.what, result.commands) == (
        "requirements.txt",
        ((*PIP, "-r", "requirements.txt"),),
    )


def test_install_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    assert install(tmp_path).commands == ((*PIP, "."),)


#: LiveKit's example agents: a [project] with dependencies, no [build-system], several top-level
#: modules (``pip install .`` refuses such a flat layout), dev tools in a dependency group.
LIVEKIT_PYPROJECT = """\
[project]
name = "hotel-agent"
version = "0.1.0"
description = "A LiveKit voice agent"
requires-python = ">=3.10"
dependencies = ["six"]

[dependency-groups]
dev = ["pytest", "ruff"]
"""
LIVEKIT_MODULES = ("agent.py", "context.py", "common.py", "policies.py")


def test_install_a_pyproject_that_is_not_a_package_installs_its_dependencies(
    tmp_path: Path,
) -> None:
    (tmp_path / "pyproject.toml").write_text(LIVEKIT_PYPROJECT)
    result = install(tmp_path)
    assert result.what == "pyproject.toml (its dependencies)" and result.in_copy
    uv_pip = ("/usr/bin/uv", "pip", "install", "--python", "/py", "--requirement")
    assert result.commands == ((*uv_pip, "pyproject.toml"),)
    # uv's rule: [tool.uv] package decides over [build-system]
    (tmp_path / "pyproject.toml").write_text(LIVEKIT_PYPROJECT + "[tool.uv]\npackage = true\n")
    assert install(tmp_path).commands == ((*PIP, "."),)
    (tmp_path / "pyproject.toml").write_text(PACKAGE_PYPROJECT + "[tool.uv]\npackage = false\n")
    assert install(tmp_path).commands == ((*uv_pip, "pyproject.toml"),)
    (tmp_path / "pyproject.toml").write_text(LIVEKIT_PYPROJECT)
    without_uv = install(tmp_path, uv=None)
    assert without_uv.commands == ((*PIP, "."),)
    assert without_uv.notice and "uv is not installed" in without_uv.notice


def test_install_a_package_pyproject_installs_the_package(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PACKAGE_PYPROJECT)
    assert install(tmp_path).commands == ((*PIP, "."),)


def test_install_lock_and_requirements_still_come_before_a_livekit_pyproject(
    tmp_path: Path,
) -> None:
    (tmp_path / "pyproject.toml").write_text(LIVEKIT_PYPROJECT)
    (tmp_path / "requirements.txt").write_text("")
    assert install(tmp_path).what == "requirements.txt"
    (tmp_path / "uv.lock").write_text("")
    assert install(tmp_path).what == "uv.lock"


def test_install_a_pyproject_that_is_not_toml_names_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "a"\ndependencies = = 1\n')
    with pytest.raises(ep.InstallError, match=r"pyproject.toml: not valid TOML: .*line 3"):
        install(tmp_path)


def test_install_caches_stay_in_the_scratch_space(tmp_path: Path) -> None:
    caches = ep.cache_environment(tmp_path)
    assert set(caches) == {"UV_CACHE_DIR", "PIP_CACHE_DIR"}
    assert all(Path(v).is_relative_to(tmp_path) for v in caches.values())


@pytest.mark.skipif(os.geteuid() != 0, reason="a Docker action's container is root")
def test_home_is_handed_back_with_the_workspace(tmp_path: Path) -> None:
    """/github/home outlives the step: what the root container wrote there (an agent's model
    cache, a library's config) goes to the runner's user, as the workspace does."""
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    for folder in (workspace, home):
        folder.mkdir()
        os.chown(folder, 1001, 121)
    cache = home / ".cache" / "huggingface" / "model.bin"
    cache.parent.mkdir(parents=True)
    cache.write_text("weights")
    (workspace / "results.json").write_text("{}")
    ep.give_back(workspace, None, str(home))
    for path in (cache, cache.parent, home / ".cache", workspace / "results.json"):
        assert (path.stat().st_uid, path.stat().st_gid) == (1001, 121), path


def test_install_nothing_found_is_a_notice(tmp_path: Path) -> None:
    result = install(tmp_path)
    assert result.commands == () and result.notice and "installing nothing" in result.notice


def test_install_none_and_a_command(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("")
    assert install(tmp_path, "none").commands == ()
    assert install(tmp_path, "none").notice is None
    custom = install(tmp_path, "pip install -r ci.txt && echo $HOME")
    assert custom.commands == (("sh", "-c", "pip install -r ci.txt && echo $HOME"),)


PACKAGE_PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "agent"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = ["six"]
"""


def files_of(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


@pytest.mark.e2e
@pytest.mark.parametrize("locked", [True, False], ids=["uv.lock", "pyproject"])
def test_install_auto_builds_outside_the_checkout(tmp_path: Path, locked: bool) -> None:
    # Real uv and pip (the image has both) into a throwaway environment, building a real
    # setuptools package: its build/ and *.egg-info/ must land in the copy, not the checkout.
    # Needs the package index, hence e2e.
    uv = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    assert uv, "uv is in the test extra"
    workspace = tmp_path / "workspace"
    project = workspace / "agent"
    project.mkdir(parents=True)
    (project / "pyproject.toml").write_text(PACKAGE_PYPROJECT)
    (project / "agent_pkg").mkdir()
    (project / "agent_pkg" / "__init__.py").write_text("VALUE = 42\n")
    version = None
    if locked:
        (project / "requirements.txt").write_text("not-used-when-there-is-a-lock\n")
        lock = subprocess.run(
            [uv, "lock", "--quiet"], cwd=project, capture_output=True, text=True, timeout=300
        )
        assert lock.returncode == 0, lock.stderr
        version = re.search(r'name = "six"\nversion = "([^"]+)"', (project / "uv.lock").read_text())
        assert version
    before = files_of(workspace)
    target = tmp_path / "target"
    # pip only where the plan runs it (a package: pip install .); uv installs into a venv
    # without one, and ensurepip is most of a venv's making
    without_pip = ["--without-pip"] if locked else []
    subprocess.run([sys.executable, "-m", "venv", *without_pip, str(target)], check=True)
    python = str(target / "bin" / "python")
    lines: list[str] = []
    plan = ep.install_plan("auto", project, python=python, uv=uv)
    copy = ep.copy_checkout(project, workspace, tmp_path / "scratch")
    assert copy == tmp_path / "scratch" / "checkout" / "agent"
    ep.run_install(plan, clean_env(), lines.append, cwd=copy)
    assert plan.what == ("uv.lock" if locked else "pyproject.toml")
    assert lines[0] == f"::group::lk-eval: install the agent's dependencies ({plan.what})"
    probe = subprocess.run(
        [python, "-c", "import six, agent_pkg; print(six.__version__, agent_pkg.__file__)"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    six_version, module = probe.stdout.split()
    if version:
        assert six_version == version.group(1)
    assert str(target) in module, "installed for good, not an editable link to the copy"
    assert files_of(workspace) == before, "the install wrote into the checkout"


@pytest.mark.e2e
def test_install_auto_on_a_livekit_style_project(tmp_path: Path) -> None:
    """A LiveKit example's pyproject.toml (not a package): its dependencies are installed with
    real uv, the project itself is not built, nothing lands in the checkout or in $HOME.
    Needs the package index, hence e2e."""
    uv = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    assert uv, "uv is in the test extra"
    project = tmp_path / "workspace"
    project.mkdir()
    (project / "pyproject.toml").write_text(LIVEKIT_PYPROJECT)
    for module in LIVEKIT_MODULES:
        (project / module).write_text("VALUE = 1\n")
    home = tmp_path / "home"
    home.mkdir()
    before = files_of(project)
    target = tmp_path / "target"
    # no pip in it: uv installs the dependencies (ensurepip is most of a venv's making)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True)
    python = str(target / "bin" / "python")
    plan = ep.install_plan("auto", project, python=python, uv=uv)
    scratch = tmp_path / "scratch"
    copy = ep.copy_checkout(project, project, scratch)
    env = {**clean_env(HOME=str(home)), **ep.cache_environment(scratch)}
    lines: list[str] = []
    ep.run_install(plan, env, lines.append, cwd=copy)
    assert plan.what == "pyproject.toml (its dependencies)"
    probe = subprocess.run(
        [python, "-c", "import six, importlib.util as u; print(u.find_spec('policies'))"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "None", "the project's own modules were installed"
    assert files_of(project) == before, "the install wrote into the checkout"
    assert files_of(home) == set(), "the install wrote into $HOME"
    assert (scratch / "cache" / "uv").is_dir(), "uv's cache is in the scratch space"


# --- the entrypoint as a process ------------------------------------------------------------------


def container_env(workspace: Path, **extra: str) -> dict[str, str]:
    """What a container action sees besides its inputs (no GitHub context needed here)."""
    return clean_env(GITHUB_ACTIONS="true", GITHUB_WORKSPACE=str(workspace), **extra)


def test_bad_input_is_an_error_annotation_and_exit_2(tmp_path: Path) -> None:
    env = container_env(
        tmp_path, **inputs(agent="agent.py", scenarios="s.yaml", **{"maybe_is_pass": "yes"})
    )
    proc = run_entrypoint(env, tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "::error::lk-eval: input `maybe-is-pass`: must be true or false, not 'yes'" in (
        proc.stdout
    )


def test_missing_required_input_as_the_runner_leaves_it(tmp_path: Path) -> None:
    # The runner sets inputs that have defaults and leaves `agent` out when it is not given;
    # no [tool.lkeval] names it either, so lkeval's own check names the input.
    env = container_env(tmp_path, **inputs(install="auto", summary="true", scenarios="s.yaml"))
    proc = run_entrypoint(env, tmp_path)
    assert proc.returncode == 2
    assert "::error::" in proc.stdout + proc.stderr
    assert "input `agent`" in proc.stdout + proc.stderr


def test_the_action_reads_tool_lkeval_from_the_checkout(tmp_path: Path) -> None:
    # A workflow needs only the inputs that differ per job: the agent comes from the file.
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "my-agent"\n\n[tool.lkeval]\nagent = "from_settings.py"\n',
        encoding="utf-8",
    )
    env = container_env(tmp_path, **inputs(install="none", scenarios="s.yaml"))
    proc = run_entrypoint(env, tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "[tool.lkeval]" in out  # the run names the file it read
    assert "from_settings.py: no such file" in out


def test_missing_working_directory(tmp_path: Path) -> None:
    env = container_env(
        tmp_path, **inputs(agent="a.py", scenarios="s.yaml", working_directory="nope")
    )
    proc = run_entrypoint(env, tmp_path)
    assert proc.returncode == 2
    assert "::error::lk-eval: input `working-directory`: nope is not a directory" in proc.stdout


def test_install_command_runs_in_the_working_directory_then_lkeval(tmp_path: Path) -> None:
    (tmp_path / "agent").mkdir()
    env = container_env(
        tmp_path,
        **inputs(
            working_directory="agent",
            agent="agent.py",
            scenarios="s.yaml",
            install="echo installed > marker && pwd >> marker",
            extra_args="--help",
        ),
    )
    proc = run_entrypoint(env, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # `lkeval run ... --help`
    marker = (tmp_path / "agent" / "marker").read_text().split()
    assert marker == ["installed", str((tmp_path / "agent").resolve())]
    assert "::group::lk-eval: install the agent's dependencies (install command)" in proc.stdout
    assert "usage: lkeval run" in proc.stdout


def test_failed_install_stops_before_lkeval_with_exit_2(tmp_path: Path) -> None:
    env = container_env(
        tmp_path, **inputs(agent="a.py", scenarios="s.yaml", install="echo trying; exit 7")
    )
    proc = run_entrypoint(env, tmp_path)
    assert proc.returncode == 2
    assert "trying" in proc.stdout
    assert re.search(
        r"::error::lk-eval: installing the agent's dependencies \(install "
        r"command\) failed: .* exited with code 7",
        proc.stdout,
    )
    assert "lk-eval: lkeval run" not in proc.stdout


def test_install_auto_with_nothing_to_install_is_a_notice(tmp_path: Path) -> None:
    env = container_env(tmp_path, **inputs(agent="missing.py", scenarios="s.yaml"))
    proc = run_entrypoint(env, tmp_path)
    assert "::notice::no uv.lock, requirements.txt or pyproject.toml" in proc.stdout
    assert proc.returncode == 2 and "input `agent` missing.py: no such file" in proc.stderr


def test_arguments_pass_straight_to_lkeval(tmp_path: Path) -> None:
    # `docker run IMAGE report --results ...`: no INPUT_* handling, lkeval's own exit code.
    failing = tmp_path / "failing.json"
    write_results(results_of(scenario("a"), scenario("b", "failed")), failing)
    passing = tmp_path / "passing.json"
    write_results(results_of(scenario("a")), passing)
    env = clean_env(**inputs(agent="ignored-with-arguments", maybe_is_pass="bogus"))
    proc = run_entrypoint(env, tmp_path, "report", "--results", "failing.json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "lk-eval gate: FAILED (exit 1)" in proc.stdout
    assert run_entrypoint(env, tmp_path, "report", "--results", "passing.json").returncode == 0
    version = run_entrypoint(env, tmp_path, "--version")
    assert version.stdout.strip() == f"lk-eval {lkeval.__version__}"


def test_no_arguments_and_no_inputs_is_usage(tmp_path: Path) -> None:
    proc = run_entrypoint(clean_env(), tmp_path)
    assert proc.returncode == 2 and "docker run" in proc.stderr


FAKE_LKEVAL = """
import signal, sys, time
from pathlib import Path
def stop(signum, frame):
    Path("got-signal").write_text(str(signum))
    sys.exit(128 + signum)
signal.signal(signal.SIGTERM, stop)
print("fake lkeval ready", sys.argv[1:], flush=True)
time.sleep(60)
"""


def test_sigterm_is_forwarded_and_the_exit_code_kept(tmp_path: Path) -> None:
    env = clean_env(PYTHONPATH=str(fake_lkeval(tmp_path / "fake", FAKE_LKEVAL)))
    proc = subprocess.Popen(
        [sys.executable, str(ENTRYPOINT), "run", "--agent", "a.py"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert "fake lkeval ready ['run', '--agent', 'a.py']" in proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    assert (tmp_path / "got-signal").read_text() == str(int(signal.SIGTERM))


#: An install that would outlive any test: only a kill ends it before the reader gives up.
ENDLESS_INSTALL = "exec sleep 900"


def rest_of_output(proc: subprocess.Popen[str]) -> str:
    """The output up to EOF, which comes only once no process holds the pipe (no orphan).

    Read in a thread with a generous deadline, so an install left running (it sleeps 15
    minutes) fails the test instead of hanging it."""
    assert proc.stdout is not None
    stdout, rest = proc.stdout, []
    reader = threading.Thread(target=lambda: rest.append(stdout.read()), daemon=True)
    reader.start()
    reader.join(timeout=120)
    assert not reader.is_alive(), "the install command outlived the entrypoint"
    return rest[0]


def test_sigterm_during_the_install_stops_it_and_nothing_runs(tmp_path: Path) -> None:
    env = container_env(
        tmp_path,
        **inputs(agent="a.py", scenarios="s.yaml", install=f"echo started; {ENDLESS_INSTALL}"),
    )
    proc = subprocess.Popen(
        [sys.executable, str(ENTRYPOINT)], env=env, cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    while (line := proc.stdout.readline()).strip() != "started":  # the command's own output
        assert line, "the install command never started"
    proc.send_signal(signal.SIGTERM)
    rest = rest_of_output(proc)  # the sleep was killed, not waited for
    assert proc.wait(timeout=120) == 143
    assert "interrupted by signal 15 while installing; nothing ran" in rest
    assert "lk-eval: lkeval run" not in rest


def test_sigterm_as_the_install_starts_leaves_no_orphan(tmp_path: Path) -> None:
    # The signal lands while the install command is being spawned: it must still be stopped.
    env = container_env(
        tmp_path, **inputs(agent="a.py", scenarios="s.yaml", install=ENDLESS_INSTALL)
    )
    proc = subprocess.Popen(
        [sys.executable, str(ENTRYPOINT)], env=env, cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    while not (line := proc.stdout.readline()).startswith("$ "):
        assert line, "the install command was never logged"
    proc.send_signal(signal.SIGTERM)
    rest = rest_of_output(proc)
    assert proc.wait(timeout=120) == 143
    assert "nothing ran" in rest


def test_a_child_killed_by_a_signal_is_128_plus_the_signal() -> None:
    child = subprocess.Popen(["sleep", "30"])
    child.send_signal(signal.SIGKILL)
    assert ep.wait_for(child.pid, reap_all=False) == 128 + signal.SIGKILL
    child.returncode = 137


# --- the action with a GitHub: report (no agent) and run (end to end) ----------------------------


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_server() as gh:
        yield gh


def actions_env(tmp_path: Path, workspace: Path, gh: FakeGitHub, **extra: str) -> dict[str, str]:
    """The variables GitHub sets for a container action on a pull_request event."""
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps({"number": PR, "pull_request": {"number": PR, "head": {"sha": "abc123"}}})
    )
    return {
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_API_URL": gh.base_url,
        "GITHUB_SERVER_URL": "https://github.example",
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_SHA": "merge999",
        "GITHUB_RUN_ID": "4242",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
        # The token input wins: the runner passes `${{ github.token }}` as INPUT_GITHUB-TOKEN.
        "GITHUB_TOKEN": "not-the-token-input",
        "LKEVAL_GITHUB_TIMEOUT": "5",
        **inputs(github_token=gh.token),
        **extra,
    }


def comments(gh: FakeGitHub, comment_id: str) -> list[dict[str, Any]]:
    return [
        c
        for c in gh.comments_of(REPO, PR)
        if str(c["body"]).startswith(f"<!-- lk-eval:{comment_id} -->")
    ]


def test_report_command_comments_summarises_and_writes_every_output(
    tmp_path: Path, github: FakeGitHub
) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "eval-results").mkdir(parents=True)
    write_results(
        results_of(scenario("a"), scenario("b", "failed")),
        workspace / "eval-results" / "results.json",
    )
    env = clean_env(
        **actions_env(
            tmp_path,
            workspace,
            github,
            **inputs(
                command="report",
                results="eval-results/results.json",
                install="auto",
                junit="eval-results/junit.xml",
                comment_id="report",
                summary="true",
            ),
        )
    )
    proc = run_entrypoint(env, workspace)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the gate's code, from lkeval
    assert "install the agent" not in proc.stdout  # nothing to install for a report
    (comment,) = comments(github, "report")
    assert "b" in comment["body"]
    assert (tmp_path / "summary.md").read_text().strip()
    assert (workspace / "eval-results" / "junit.xml").is_file()
    outputs = read_outputs(tmp_path / "output.txt")
    assert set(outputs) == set(action()["outputs"]), "action.yml outputs differ from publish's"
    assert outputs["gate"] == "fail" and outputs["exit-code"] == "1"
    assert outputs["comment-url"] == comment["html_url"]
    # ``::add-mask::`` lines are consumed by the runner, never shown: every other line counts
    shown = [line for line in proc.stdout.splitlines() if not line.startswith("::add-mask::")]
    assert "not-the-token-input" not in "\n".join(shown) + proc.stderr
    assert "::add-mask::not-the-token-input" in proc.stdout.splitlines()[:2]


@pytest.mark.e2e
def test_action_end_to_end_on_the_hotel_example(
    tmp_path: Path, github: FakeGitHub, hotel_llm: LLMServer
) -> None:
    workspace = tmp_path / "workspace"
    agent_dir = workspace / "agent"
    shutil.copytree(HOTEL, agent_dir, ignore=shutil.ignore_patterns("__pycache__"))
    # Already installed, so install: auto runs pip for real and changes nothing.
    (agent_dir / "requirements.txt").write_text("pyyaml\n")
    env = hotel_env(
        hotel_llm,
        **actions_env(
            tmp_path,
            workspace,
            github,
            **inputs(
                working_directory="agent",
                agent="agent.py",
                scenarios="scenarios.yaml",
                match="SCN_*",  # the three scripted scenarios of the example; the fourth is skipped
                # SCN_vetoGrace01 fails, quarantined: reported, not blocking
                quarantine="flaky=true",
                concurrency="2",
                boot_timeout="90",
                install="auto",
                markdown="lkeval-results/report.md",
                comment="update",
                comment_id="e2e",
                summary="true",
                maybe_is_pass="false",
                extra_args="--logs-dir 'agent logs'",
            ),
        ),
    )
    proc = run_entrypoint(env, workspace, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "::group::lk-eval: install the agent's dependencies (requirements.txt)" in proc.stdout
    assert "Requirement already satisfied" in proc.stdout

    results = read_json(agent_dir / "lkeval-results" / "results.json")
    statuses = {s["scenario_id"]: (s["status"], s["quarantined"]) for s in results["scenarios"]}
    assert statuses == {
        "SCN_checkDouble01": ("passed", False),
        "SCN_bookAda01": ("passed", False),
        "SCN_vetoGrace01": ("failed", True),
        "hotel-front-desk/guest-books-a-room-by-talking-to-the-desk": ("skipped", False),
    }
    junit = (agent_dir / "lkeval-results" / "junit.xml").read_text()
    # Relative to the repository (the workspace), not to working-directory: annotators
    # resolve it from the root.
    assert 'file="agent/scenarios.yaml"' in junit and 'file="scenarios.yaml"' not in junit
    assert results["metadata"]["git_sha"] == "abc123"  # the PR's head, from the payload
    assert "Agent vetoes" in (agent_dir / "lkeval-results" / "report.md").read_text()
    for report in ("results.json", "junit.xml", "report.md"):  # readable by later steps
        assert (agent_dir / "lkeval-results" / report).stat().st_mode & 0o777 == 0o644
    litter = [
        p
        for p in workspace.rglob("*")
        if p.name in ("__pycache__", "build") or p.name.endswith(".egg-info")
    ]
    assert litter == [], "left in the checkout"
    assert list((agent_dir / "agent logs").iterdir())

    (comment,) = comments(github, "e2e")
    assert "Agent vetoes" in comment["body"]
    assert "## lk-eval · e2e: ✅ gate passed" in comment["body"]
    assert "commit `abc123`" in comment["body"] and "merge999" not in comment["body"]
    assert "Agent vetoes" in (tmp_path / "summary.md").read_text()
    outputs = read_outputs(tmp_path / "output.txt")
    assert set(outputs) == set(action()["outputs"])
    counts = ("gate", "exit-code", "total", "passed", "failed", "skipped", "quarantined")
    assert {k: outputs[k] for k in counts} == {
        "gate": "pass",
        "exit-code": "0",
        "total": "4",
        "passed": "2",
        "failed": "0",
        "skipped": "1",
        "quarantined": "1",
    }
    assert outputs["results-path"] == "lkeval-results/results.json"
    assert outputs["comment-url"] == comment["html_url"]
    assert "::error" not in proc.stdout  # quarantined failures are not annotated
    shown = [line for line in out.splitlines() if not line.startswith("::add-mask::")]
    assert not any(github.token in line for line in shown)  # masked everywhere it is shown


# --- drift: action.yml, entrypoint, docs, version ---------------------------------------------


def test_action_runs_a_prebuilt_image_by_digest_with_no_arguments() -> None:
    runs = action()["runs"]
    assert set(runs) == {"using", "image", "args"}
    assert runs["using"] == "docker"
    # pulled, never built on the user's runner; pinned by digest (release.yml rewrites it)
    assert re.fullmatch(r"docker://ghcr\.io/[a-z0-9-]+/lk-eval@sha256:[0-9a-f]{64}", runs["image"])
    # declared and empty: the runner then never passes an input as the command line
    assert runs["args"] == []
    assert "${{" not in ACTION.read_text().split("\nruns:", 1)[1]


def test_every_input_is_consumed_by_the_entrypoint_with_the_same_default() -> None:
    declared = action()["inputs"]
    assert list(declared) == [spec.name for spec in ep.INPUTS]
    for spec in ep.INPUTS:
        default = str(declared[spec.name].get("default", ""))
        if spec.name == "github-token":
            assert default == "${{ github.token }}"
        else:
            assert default == spec.default, spec.name


def test_every_input_and_output_has_a_description() -> None:
    data = action()
    for kind in ("inputs", "outputs"):
        for name, spec in data[kind].items():
            assert str(spec.get("description", "")).strip(), f"{kind}.{name}"


def test_no_input_is_marked_required_that_report_does_not_need() -> None:
    # The runner does not enforce `required`; the entrypoint does, per command.
    assert not any(spec.get("required") for spec in action()["inputs"].values())


def table_names(markdown: str, heading: str) -> list[str]:
    """The first-column names of the table under ``heading`` in docs/action.md."""
    section = markdown.split(heading + "\n", 1)[1].split("\n#", 1)[0]
    return re.findall(r"^\| `([a-z0-9-]+)` \|", section, flags=re.MULTILINE)


def test_docs_list_every_input_and_output_with_its_default() -> None:
    docs = DOCS.read_text(encoding="utf-8")
    data = action()
    assert table_names(docs, "## Inputs") == list(data["inputs"])
    assert table_names(docs, "## Outputs") == list(data["outputs"])
    for name, spec in data["inputs"].items():
        row = next(line for line in docs.splitlines() if line.startswith(f"| `{name}` |"))
        default = str(spec.get("default", ""))
        if default:
            assert f"`{default}`" in row, f"docs/action.md: default of {name}"


def test_the_action_tables_are_generated_from_action_yml() -> None:
    # One source: docs/action.md's tables are action.yml's words; the README links to them.
    docs = DOCS.read_text(encoding="utf-8")
    assert render(docs, action()) == docs, f"docs/action.md is stale: run `{DOCS_COMMAND}`"
    readme = README.read_text(encoding="utf-8")
    assert "| Input | Description |" not in readme and "| Output | Description |" not in readme
    assert "docs/action.md#inputs" in readme and "docs/action.md#outputs" in readme


def test_a_changed_description_makes_the_tables_stale() -> None:
    changed = action()
    changed["outputs"]["gate"]["description"] = "Something else entirely."
    docs = DOCS.read_text(encoding="utf-8")
    assert render(docs, changed) != docs
    assert "| `gate` | Something else entirely. |" in render(docs, changed)


def test_markdown_links_inside_the_repo_resolve() -> None:
    # A link to a heading of the same file (``#installing-the-agents-dependencies``) or to a
    # file of the repository must land: a README that links into nothing misleads.
    for page in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            assert linked.exists(), f"{page.name}: {target}"
            if anchor and linked.suffix == ".md":
                assert anchor in _anchors(linked.read_text(encoding="utf-8")), (
                    f"{page.name}: {target}"
                )


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", markdown, flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def test_readme_points_to_the_action_docs() -> None:
    assert "docs/action.md" in README.read_text(encoding="utf-8")


def test_version_in_action_and_image_matches_the_package() -> None:
    first = ACTION.read_text(encoding="utf-8").splitlines()[0]
    assert first == f"# lk-eval {lkeval.__version__}"
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    default = re.search(r"^ARG VERSION=(\S+)$", dockerfile, flags=re.MULTILINE)
    assert default and default.group(1) == lkeval.__version__
    assert 'org.opencontainers.image.version="${VERSION}"' in dockerfile


def test_docs_local_docker_command_is_what_the_entrypoint_passes_on() -> None:
    # The documented `docker run ... IMAGE run --agent ...` arguments must parse as lkeval's.
    from lkeval.cli import build_parser

    docs = DOCS.read_text(encoding="utf-8")
    line = next(x for x in docs.splitlines() if x.startswith("docker run --rm -v"))
    after_image = line.split(" lk-eval ", 1)[1]
    args = build_parser().parse_args(after_image.split())
    assert (args.command, args.agent, args.scenarios) == ("run", "agent.py", ["scenarios.yaml"])


def test_the_entrypoint_masks_first_and_never_echoes_a_secret(tmp_path: Path) -> None:
    token, key, hook = "ghs_entrypoint_token_1", "sk_live_extra_args_2", "plain-named-hook-3"
    url_pass, index_pass = "PASSWORD-in-a-url-4", "index-pass-5"  # issue 19.1
    env = container_env(
        tmp_path,
        DEPLOY_HOOK=hook,
        PIP_EXTRA_INDEX_URL=f"https://a:{index_pass}@pypi.example/simple https://pypi.org/s",
        **inputs(
            agent="agent.py",
            scenarios="s.yaml",
            github_token=token,
            install="none",
            extra_args=f"--env STRIPE_SECRET_KEY={key} --env MODE=fast "
            f"--env DB=postgres://u:{url_pass}@h/x --secret-env DEPLOY_HOOK --help",
        ),
    )
    proc = run_entrypoint(env, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    secrets = (token, key, hook, url_pass, index_pass)
    lines = proc.stdout.splitlines()
    first_other = next(i for i, line in enumerate(lines) if not line.startswith("::add-mask::"))
    # every secret is announced before the first line that is not a mask (lkeval repeats
    # its own masks later, which the runner consumes too)
    announced = {line.removeprefix("::add-mask::") for line in lines[:first_other]}
    assert set(secrets) <= announced, announced
    shown = [line for line in lines if not line.startswith("::add-mask::")]
    echoed = next(line for line in shown if line.startswith("lk-eval: lkeval "))
    assert "STRIPE_SECRET_KEY=***" in echoed and "MODE=fast" in echoed
    assert "DB=postgres://u:***@h/x" in echoed
    for secret in secrets:
        assert secret not in "\n".join(shown) + proc.stderr, secret


def test_an_input_error_is_printed_after_the_masks(tmp_path: Path) -> None:
    # The inputs make no plan (an unclosed quote): the error quotes extra-args, which carries
    # a URL password; the runner must have been told it first.
    secret = "PASSWORD-in-bad-input-6"
    env = container_env(
        tmp_path,
        **inputs(
            agent="agent.py",
            scenarios="s.yaml",
            install="none",
            extra_args=f'--env DB=postgres://u:{secret}@h/x --judge-model "unclosed',
        ),
    )
    proc = run_entrypoint(env, tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"::add-mask::{secret}"
    error = next(line for line in lines if line.startswith("::error::"))
    assert "extra-args" in error and secret not in error


def test_the_entrypoints_own_commands_break_the_legacy_prefix(tmp_path: Path) -> None:
    # issue 19.7: an input quoted in the entrypoint's ::error:: carried ##[ unbroken.
    env = container_env(tmp_path, **inputs(command="##[error]injected", install="none"))
    proc = run_entrypoint(env, tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert "injected" in out
    assert legacy_markers(out) == [], out
    assert [c.split("::")[1] for c in runner_commands(out)] == ["error"]


def test_the_entrypoint_has_no_masking_rules_of_its_own() -> None:
    # issue 19.1: lkeval_action once had a second masker without the URL-password rule.
    source = "\n".join(p.read_text() for p in (ROOT / "lkeval_action").glob("*.py"))
    source += (ROOT / "entrypoint.py").read_text()
    for own_rule in ("SECRET_NAME_PARTS", "urlsplit", "is_secret_name", ".replace(value, "):
        assert own_rule not in source, own_rule
