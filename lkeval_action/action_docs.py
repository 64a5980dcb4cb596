"""The Action's inputs and outputs tables in docs/action.md, generated from action.yml.

``action.yml`` is the one source: what GitHub shows on the Marketplace page and what the docs
list are the same words. Run ``python -m lkeval_action.action_docs`` after changing an input or
output; ``tests/action/test_action.py`` fails while docs/action.md is out of date.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
ACTION = ROOT / "action.yml"
DOCS = ROOT / "docs" / "action.md"
COMMAND = "python -m lkeval_action.action_docs"


def _cell(text: Any) -> str:
    """One table cell: a single line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def inputs_table(action: dict[str, Any]) -> str:
    """| Input | Description | Default | rows, in action.yml's order."""
    rows = ["| Input | Description | Default |", "|---|---|---|"]
    for name, spec in action["inputs"].items():
        default = spec.get("default", "")
        shown = f"`{_cell(default)}`" if str(default) else ""
        rows.append(f"| `{name}` | {_cell(spec.get('description', ''))} | {shown} |")
    return "\n".join(rows)


def outputs_table(action: dict[str, Any]) -> str:
    """| Output | Description | rows, in action.yml's order."""
    rows = ["| Output | Description |", "|---|---|"]
    for name, spec in action["outputs"].items():
        rows.append(f"| `{name}` | {_cell(spec.get('description', ''))} |")
    return "\n".join(rows)


def _markers(kind: str) -> tuple[str, str]:
    return (
        f"<!-- {kind} table: generated from action.yml by `{COMMAND}`; do not edit -->",
        f"<!-- end of {kind} table -->",
    )


def render(docs: str, action: dict[str, Any]) -> str:
    """``docs`` with the text between each pair of markers replaced by its table."""
    for kind, table in (("inputs", inputs_table(action)), ("outputs", outputs_table(action))):
        start, end = _markers(kind)
        before, found, rest = docs.partition(start + "\n")
        if not found or end not in rest:
            raise ValueError(f"{DOCS.name}: no {start!r} ... {end!r} block")
        after = rest.split(end, 1)[1]
        docs = f"{before}{start}\n{table}\n{end}{after}"
    return docs


def load_action(path: Path = ACTION) -> dict[str, Any]:
    """action.yml, parsed."""
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def main() -> int:
    """Rewrite docs/action.md's tables; exit 0 (1 when the markers are missing)."""
    try:
        updated = render(DOCS.read_text(encoding="utf-8"), load_action())
    except ValueError as exc:
        print(f"action_docs: {exc}", file=sys.stderr)
        return 1
    DOCS.write_text(updated, encoding="utf-8")
    print(f"wrote {DOCS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
