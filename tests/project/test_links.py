"""Every relative link in the repository's Markdown leads somewhere: the file exists, and an
``#anchor`` names one of its headings (as GitHub makes them). Docs move; links must follow."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP = {".git", ".venv", "node_modules", ".pytest_cache"}
LINK = re.compile(r"\]\(([^)\s]+)\)")


def markdown_files() -> list[Path]:
    return sorted(
        p
        for p in ROOT.rglob("*.md")
        if not SKIP.intersection(p.relative_to(ROOT).parts)
        and not any(part.startswith(".venv") for part in p.relative_to(ROOT).parts)
        and "tests" not in p.relative_to(ROOT).parts[:1]
    )


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {anchor(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)}


def broken_links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z+.-]*:", target):  # https:, mailto: ...
            continue
        file_part, _, fragment = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target} (no heading #{fragment})")
    return broken


def test_every_relative_link_in_the_markdown_resolves() -> None:
    found = {str(p.relative_to(ROOT)): broken_links(p) for p in markdown_files() if broken_links(p)}
    assert found == {}


def test_the_checker_sees_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "a.md"
    page.write_text("# Top\n\n[x](b.md) [y](#top) [z](#nope) [w](https://example.com)\n")
    assert broken_links(page) == ["b.md (no such file)", "#nope (no heading #nope)"]
