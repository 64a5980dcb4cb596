"""The README stays true and short: its --help block, its scenario examples (and those of
docs/scenarios.md, where the reference moved), its make targets, its length."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HOTEL, ROOT, hotel_env, read_json, run_argv, run_lkeval

from lkeval.scenarios.loader import load_scenario_file
from lkeval.testing.llm_server import LLMServer

README = (ROOT / "README.md").read_text(encoding="utf-8")
SCENARIOS_DOC = (ROOT / "docs" / "scenarios.md").read_text(encoding="utf-8")
#: What a newcomer reads in five minutes; depth lives in docs/.
README_LINES = 250


def _blocks(lang: str, text: str = README) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.DOTALL)


# Every YAML snippet of the README and of the scenario reference that is a scenario file: each
# is played against the example agent below, so an example a user copies works on a real agent.
SCENARIO_SNIPPETS = [
    b
    for text in (README, SCENARIOS_DOC)
    for b in _blocks("yaml", text)
    if re.search(r"^scenarios:", b, re.MULTILINE)
]


def test_help_block_matches_the_real_help() -> None:
    (block,) = [b for b in _blocks("text") if b.startswith("usage: lkeval")]
    env = {**os.environ, "COLUMNS": "80"}
    real = subprocess.run(
        [sys.executable, "-m", "lkeval", "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    assert block.strip() == real.strip()


def test_scenario_example_is_a_valid_file(tmp_path: Path) -> None:
    (block,) = [b for b in _blocks("yaml") if "min_pass:" in b]
    path = tmp_path / "scenarios.yaml"
    path.write_text(block, encoding="utf-8")
    group, diagnostics = load_scenario_file(path)
    assert [d for d in diagnostics if d.is_error] == []
    (scenario,) = group.scenarios
    assert len(scenario.turns) == 3 and scenario.repeat == 3 and scenario.min_pass == 2


def test_make_targets_named_in_the_readme_exist() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in re.findall(r"^make ([\w-]+)", README, flags=re.MULTILINE):
        assert re.search(rf"^{target}:", makefile, flags=re.MULTILINE), target


def test_the_readme_has_scenario_snippets() -> None:
    assert len(SCENARIO_SNIPPETS) >= 2


@pytest.mark.e2e
@pytest.mark.parametrize("index", range(len(SCENARIO_SNIPPETS)))
def test_every_scenario_snippet_passes_on_the_example_agent(
    tmp_path: Path, hotel_llm: LLMServer, index: int
) -> None:
    """Through the real CLI, the example agent (examples/hotel) and its local LLM: the gate
    passes, and every scripted check of every run passed (none skipped, none judged away)."""
    path = tmp_path / "scenarios.yaml"
    path.write_text(SCENARIO_SNIPPETS[index], encoding="utf-8")
    results_path = tmp_path / "results.json"
    argv = run_argv(HOTEL / "agent.py", path, results_path)
    argv += ["--caller-model", "caller", "--judge-model", "judge", "--no-github"]
    proc = run_lkeval(argv, hotel_env(hotel_llm), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = read_json(results_path)
    group, _ = load_scenario_file(path)
    assert len(results["scenarios"]) == len(group.scenarios)
    for scenario, result in zip(group.scenarios, results["scenarios"], strict=True):
        assert result["status"] == "passed", result
        checks = sum(len(t.expect) for t in scenario.turns)
        for attempt in result["attempts"]:
            assert len(attempt["expectations"]) == checks
            assert all(e["passed"] for e in attempt["expectations"]), attempt["expectations"]


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_into_the_readme_names_one_of_its_headings() -> None:
    anchors = {_anchor(h) for h in re.findall(r"^#+ (.+)$", README, flags=re.MULTILINE)}
    links = re.findall(r"\]\(#([^)]+)\)", README)
    assert [link for link in links if link not in anchors] == []


def test_every_run_flag_is_documented() -> None:
    """In the README or the docs it links to (docs/cli.md holds every flag's help)."""
    from lkeval.cli import build_parser

    parser = build_parser()
    (subparsers,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    run = subparsers.choices["run"]  # type: ignore[attr-defined]
    flags = {o for a in run._actions for o in a.option_strings if o.startswith("--")}
    docs = README + "".join(
        p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md"))
    )
    missing = sorted(f for f in flags - {"--help"} if not re.search(rf"{f}\b(?!-)", docs))
    assert missing == []


def test_the_readme_is_read_in_five_minutes() -> None:
    assert len(README.splitlines()) <= README_LINES
    assert "docs/cli.md" in README


def test_the_readme_quick_start_workflow_is_clean_under_zizmor(tmp_path: Path) -> None:
    """The workflow a newcomer copies keeps no token on disk beside pull-request code."""
    (workflow,) = [b for b in _blocks("yaml") if b.startswith("on: pull_request")]
    assert "persist-credentials: false" in workflow
    zizmor = Path(sys.executable).with_name("zizmor")
    if not zizmor.exists():
        pytest.fail("zizmor is not installed: make setup installs it (the lint extra)")
    path = tmp_path / ".github" / "workflows" / "eval.yml"
    path.parent.mkdir(parents=True)
    path.write_text(workflow, encoding="utf-8")
    config = ROOT / ".github" / "zizmor.yml"
    proc = subprocess.run(
        [str(zizmor), "--offline", "--no-progress", "--config", str(config), str(path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
