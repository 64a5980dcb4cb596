"""docs/cli.md is every command's real ``--help``: regenerate it with
``python tests/project/test_cli_doc.py`` after changing a flag; this test fails when it is stale."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "cli.md"
COMMANDS = ("run", "dev", "validate", "report", "merge", "calibrate", "pin")
HEAD = """# The command line

Every command's `--help`, as it prints (generated: `python tests/project/test_cli_doc.py`; a test
fails when this page and the real help differ). Options can also be set in `[tool.lkeval]`
([settings.md](settings.md)).
"""


def real_help(command: str) -> str:
    env = {**os.environ, "COLUMNS": "100"}
    argv = [sys.executable, "-m", "lkeval", command, "--help"]
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=True).stdout


def render() -> str:
    parts = [HEAD]
    for command in COMMANDS:
        parts.append(f"## `lkeval {command}`\n\n```text\n{real_help(command).rstrip()}\n```\n")
    return "\n".join(parts)


def test_the_cli_page_is_the_real_help() -> None:
    assert DOC.read_text(encoding="utf-8") == render(), "run python tests/project/test_cli_doc.py"


if __name__ == "__main__":
    DOC.write_text(render(), encoding="utf-8")
    print(f"wrote {DOC}")
