"""The repository explains itself: every variable lk-eval reads is documented, and nothing in
the repository points at a file outside it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from conftest import ROOT

ENVIRONMENT = ROOT / "docs" / "environment.md"
#: What lk-eval ships: the package, the Action's entrypoint and its helpers.
CODE = [*sorted((ROOT / "lkeval").rglob("*.py")), *sorted((ROOT / "lkeval_action").rglob("*.py"))]
CODE.append(ROOT / "entrypoint.py")
#: ``f"LKEVAL_{role.upper()}_MODEL"``: one name per role.
ROLES = ("CALLER", "JUDGE")
_NAME = re.compile(r"LKEVAL_(?:\{[^}]*\}_)?[A-Z0-9_]*[A-Z0-9]")


def variables_read(sources: list[Path]) -> set[str]:
    """Every ``LKEVAL_*`` name the code spells, role templates expanded."""
    found: set[str] = set()
    for path in sources:
        for name in _NAME.findall(path.read_text(encoding="utf-8")):
            if "{" in name:
                suffix = name.split("}_", 1)[1]
                found |= {f"LKEVAL_{role}_{suffix}" for role in ROLES}
            else:
                found.add(name)
    # Constants that are not variables: a tuple of scenario keys lk-eval adds.
    return found - {"LKEVAL_SCENARIO_KEYS"}


def test_the_scan_finds_templated_and_plain_names(tmp_path: Path) -> None:
    code = tmp_path / "x.py"
    code.write_text('os.environ.get(f"LKEVAL_{role.upper()}_PRICE") or env["LKEVAL_NEW_KNOB"]\n')
    assert variables_read([code]) == {
        "LKEVAL_CALLER_PRICE",
        "LKEVAL_JUDGE_PRICE",
        "LKEVAL_NEW_KNOB",
    }


def test_every_lkeval_variable_the_code_reads_is_documented() -> None:
    documented = set(re.findall(r"`(LKEVAL_[A-Z0-9_]+)`", ENVIRONMENT.read_text(encoding="utf-8")))
    read = variables_read(CODE)
    assert {"LKEVAL_GITHUB_TIMEOUT", "LKEVAL_CALLER_PRICE", "LKEVAL_JUDGE_PRICE"} <= read
    assert sorted(read - documented) == [], "add them to docs/environment.md"


def test_nothing_in_the_repository_points_outside_it() -> None:
    # Facts the code relies on live in docs/ (protocol.md, warm-starts.md, testing.md), in the
    # project's own words: a citation of a file only some machines have explains nothing.
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    outside = re.compile(r"DESIGN\.md|DESIGN §|/work/|\.\./shared/|/coord/")
    offenders = []
    for name in tracked:
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".yml", ".yaml", ".toml", ".txt", ""}:
            continue
        if not path.is_file() or path == Path(__file__).resolve():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        offenders += [f"{name}: {m.group(0)}" for m in outside.finditer(text)]
    assert offenders == []
