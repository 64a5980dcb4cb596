"""Parsing a scenario file is bounded: an alias bomb, a huge file or deep nesting is refused.

A scenario file can come from a pull request, so these run through the real CLI as well, with a
memory limit on the process: an implementation that expanded the bomb would die instead of
printing the one line asserted here.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from lkeval.scenarios.bounds import MAX_ALIASES, MAX_DEPTH, MAX_FILE_BYTES
from lkeval.scenarios.loader import load_scenario_file


def alias_bomb() -> str:
    """The classic "billion laughs" under userdata: 462 bytes, 9**9 values once expanded."""
    lines = [
        "scenarios:",
        "  - label: Billions",
        "    instructions: hi",
        "    userdata:",
        '      a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
    ]
    previous = "a"
    for name in "bcdefghi":
        lines.append(f"      {name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
        previous = name
    return "\n".join(lines) + "\n"


BOMB_ERROR = (
    "bomb.yaml:13:10: error: scenarios[0].userdata.i: YAML aliases expand this value to "
    "435848050 values; at most 100000 may come from aliases in a file (an alias bomb?)"
)


@pytest.fixture
def bomb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = Path("bomb.yaml")
    path.write_text(alias_bomb())
    assert len(path.read_bytes()) == 462
    return path


def _limited_memory() -> None:
    limit = 1024 * 1024 * 1024  # 1 GiB: the bomb expanded needs several
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def lkeval(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lkeval", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        preexec_fn=_limited_memory,
    )


def test_the_bomb_is_one_error_naming_line_and_field(bomb: Path) -> None:
    group, diagnostics = load_scenario_file(bomb)
    assert [str(d) for d in diagnostics] == [BOMB_ERROR]
    assert group.scenarios == ()


@pytest.mark.parametrize("command", ["validate", "run"])
def test_validate_and_run_refuse_the_bomb_with_exit_2(bomb: Path, command: str) -> None:
    Path("agent.py").write_text("raise SystemExit('never imported')\n")
    args = ["validate", "bomb.yaml"]
    if command == "run":
        args = ["run", "--agent", "agent.py", "--scenarios", "bomb.yaml", "--no-github"]
    done = lkeval(*args, cwd=Path.cwd())
    assert done.returncode == 2, done.stderr
    assert BOMB_ERROR in done.stderr
    assert "Traceback" not in done.stderr
    assert not Path("lkeval-results").exists()  # nothing booted, nothing written


def test_aliases_of_a_real_file_still_load(tmp_path: Path) -> None:
    """Anchors shared between scenarios (a common persona, a seed state) are fine."""
    path = tmp_path / "s.yaml"
    path.write_text(
        "seed: &seed {rooms: [101, 102, 103], guests: [{name: Ada}, {name: Grace}]}\n"
        "scenarios:\n"
        + "".join(
            f"  - {{label: S{i}, instructions: hi, userdata: {{state: *seed}}}}\n"
            for i in range(50)
        )
    )
    group, diagnostics = load_scenario_file(path)
    assert [d for d in diagnostics if d.is_error] == []
    assert group.scenarios[49].userdata == {
        "state": {"rooms": [101, 102, 103], "guests": [{"name": "Ada"}, {"name": "Grace"}]}
    }


def test_too_many_aliases(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    refs = ", ".join(["*x"] * (MAX_ALIASES + 1))
    path.write_text(
        f"x: &x 1\nscenarios:\n  - {{label: A, instructions: hi, userdata: {{a: [{refs}]}}}}\n"
    )
    _, diagnostics = load_scenario_file(path)
    assert [d.message for d in diagnostics] == [
        f"{MAX_ALIASES + 1} YAML aliases; at most {MAX_ALIASES} are allowed"
    ]


def test_a_merge_key_bomb_is_refused_too(tmp_path: Path) -> None:
    lines = ["a: &a {k0: x, k1: x, k2: x, k3: x, k4: x, k5: x, k6: x, k7: x, k8: x, k9: x}"]
    previous = "a"
    for name in "bcdefg":
        lines.append(
            f"{name}: &{name} {{" + ", ".join(f"k{i}: *{previous}" for i in range(10)) + "}"
        )
        previous = name
    lines.append("scenarios:\n  - {label: A, instructions: hi, userdata: {<<: *g}}")
    path = tmp_path / "s.yaml"
    path.write_text("\n".join(lines) + "\n")
    _, diagnostics = load_scenario_file(path)
    assert len(diagnostics) == 1 and "YAML aliases expand this value" in diagnostics[0].message


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"scenarios: []\n" + b"#" * MAX_FILE_BYTES)
    _, diagnostics = load_scenario_file(path)
    assert [str(d) for d in diagnostics] == [
        f"{path}: error: file is larger than 10 MiB; split it into several scenario files"
    ]


def test_deep_nesting_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    depth = MAX_DEPTH + 10
    path.write_text(
        "scenarios:\n  - label: A\n    instructions: hi\n    userdata:\n      a: "
        + "[" * depth
        + "]" * depth
        + "\n"
    )
    _, diagnostics = load_scenario_file(path)
    assert [d.message for d in diagnostics] == [f"nested more than {MAX_DEPTH} levels deep"]
    assert diagnostics[0].line == 5


def test_nesting_beyond_the_parser_limits_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    _, diagnostics = load_scenario_file(path)
    assert len(diagnostics) == 1 and diagnostics[0].is_error
    assert "nest" in diagnostics[0].message
