"""Untrusted text is inert: no workflow commands, no raw control characters, no live Markdown."""

from __future__ import annotations

import io

import pytest
from action_runner import legacy_markers, runner_commands

from lkeval.text.untrusted import (
    LABEL_CHARS,
    inert,
    inert_line,
    label,
    md_cell,
    md_code_block,
    md_text,
    terminal_text,
    visible,
)

HOSTILE = "Book\n::error::pwned\r::add-mask::x \x1b]0;title\x07 ##[warning]old-style"


def test_inert_line_is_never_a_command() -> None:
    line = inert_line(f"lk-eval gate: FAILED — 1 failed: {HOSTILE}")
    assert runner_commands(line) == []
    assert "\x1b" not in line and "\x07" not in line and "\\x1b" in line
    for text in ("::error::x", "  ::warning::y", "\u00a0::add-mask::z", "a ##[error]b"):
        assert runner_commands(inert_line(text)) == [], text


def test_inert_block_keeps_its_lines_inert() -> None:
    block = "\n".join(inert(["::error::a", "##[error]b", "plain"]))
    assert runner_commands(block) == []
    assert "plain" in block


def test_visible_shows_controls() -> None:
    assert visible("a\x1b[31mb\x07c\r\nd") == "a\\x1b[31mb\\x07c\\x0d\\x0ad"
    assert visible("a\x1bb\r\nc\td\re", lines=True) == "a\\x1bb\nc\td\\x0de"
    assert visible("\u202eevil") == "\\u202eevil"


def test_terminal_text_and_label_are_bounded_one_line() -> None:
    long = "word " * 1000
    assert len(label(long)) == LABEL_CHARS and "\n" not in terminal_text("a\nb")


@pytest.mark.parametrize(
    "hostile,forbidden",
    [
        ("[click](https://evil.example/x)", "](http"),
        ("![img](https://evil.example/p.png)", "!["),
        ("<img src=x onerror=alert(1)>", "<img"),
        ("ping @org/team and @alice", "@org"),
        ("mail bob@example.com", "bob@example"),
        ("see https://evil.example", "https://"),
        ("see www.evil.example", "www.evil"),
        ("`code` **bold** # heading", "`code`"),
        ("<!-- hidden -->", "<!--"),
    ],
)
def test_md_text_is_inert(hostile: str, forbidden: str) -> None:
    out = md_text(hostile)
    assert forbidden not in out
    assert "<" not in out and "[" not in out and "`" not in out


def test_mentions_broken_the_way_bots_do() -> None:
    assert md_text("@org/team") == "@\u200borg/team"


def test_md_cell_cannot_split_a_table() -> None:
    cell = md_cell("a | b\nc " + "x" * 500)
    assert "|" not in cell and "\n" not in cell and len(cell) < 260


def test_code_block_fence_outgrows_any_backtick_run() -> None:
    text = "before\n```\nbreak out @alice [x](http://e)\n`````\nafter\x1b"
    block = md_code_block(text)
    fence = block.splitlines()[0]
    assert fence == "``````" and block.endswith("\n" + fence)
    inner = block.splitlines()[1:-1]
    assert all(not line.startswith(fence) for line in inner)
    assert "\x1b" not in block and "\\x1b" in block


def test_a_huge_hostile_label_is_bounded_and_inert_in_every_report() -> None:
    from report_fixtures import results_of, scenario

    from lkeval.cli.report import printed_gate_line as gate_line
    from lkeval.reporters import REPORTER_BY_NAME, build_report
    from lkeval.results.gate import evaluate_gate

    huge = "[x](https://e.example) @team " + "L" * 10_000
    results = results_of(scenario(huge, "failed"))
    gate = evaluate_gate(results, None)
    report = build_report(results, None, gate)
    for name, cls in REPORTER_BY_NAME.items():
        if name == "json":
            continue  # the results file keeps the data itself
        out = cls().format(report)
        assert "L" * (LABEL_CHARS + 1) not in out, name
    markdown = REPORTER_BY_NAME["markdown"]().format(report)
    assert "](https://" not in markdown and "@team" not in markdown
    assert len(gate_line(gate)) <= 4000 and runner_commands(gate_line(gate)) == []


def test_errors_and_validate_diagnostics_quoting_a_scenario_file_are_inert(
    tmp_path: object,
) -> None:
    import subprocess
    import sys
    from pathlib import Path

    from conftest import clean_env

    path = Path(str(tmp_path)) / "s.yaml"
    path.write_text('scenarios:\n  - label: ok\n    "bad\\n::error::injected\\e]0;x": 1\n')
    for command in (
        ["validate", str(path)],
        ["run", "--agent", str(path), "--scenarios", str(path)],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "lkeval", *command],
            capture_output=True,
            text=True,
            env=clean_env(),
            timeout=60,
        )
        out = proc.stdout + proc.stderr
        assert "injected" in out, out  # the key is quoted ...
        assert runner_commands(out) == [], out  # ... but cannot become a command
        assert "\x1b" not in out


@pytest.mark.parametrize("github", [True, False])
def test_progress_lines_are_inert(github: bool) -> None:
    import io

    from report_fixtures import results_of, scenario

    from lkeval.publish.progress import make_progress

    stream = io.StringIO()
    hostile = scenario(HOSTILE, "failed")
    make_progress(stream, github).scenario_finished(results_of(hostile).scenarios[0])
    out = stream.getvalue()
    assert "pwned" in out and "old-style" in out
    assert [
        c for c in runner_commands(out) if not c.startswith(("::group::", "::endgroup::"))
    ] == []
    assert legacy_markers(out) == []  # issue 19.7: the ::group:: title carried the label's ##[
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out


def test_no_workflow_command_carries_an_unbroken_legacy_prefix() -> None:
    # issue 19.7: ``##[`` reached ::group:: titles and ::error title= unbroken.
    from report_fixtures import results_of, scenario

    from lkeval.publish.github.workflow import error_annotations, group
    from lkeval.text.untrusted import command, warning

    hostile = "Crash ##[error]legacy, command: ##[group]x"
    lines = [
        command("error", hostile, file=f"s{hostile}.yaml", line=3, title=hostile),
        command("notice", "%23#[" + hostile),
        warning(hostile),
        *error_annotations(results_of(scenario(hostile, "failed")))[0],
        *inert([hostile, "##[endgroup]"]),
    ]
    with io.StringIO() as stream:
        with group(stream, hostile):
            stream.write(inert_line(hostile) + "\n")
        lines.append(stream.getvalue())
    out = "\n".join(lines)
    assert "legacy" in out and legacy_markers(out) == [], legacy_markers(out)
    names = [c.split("::")[1].split(" ")[0] for c in runner_commands(out)]
    assert names == ["error", "notice", "warning", "error", "group", "endgroup"]


def test_every_line_break_is_escaped_in_a_command_and_a_log_line() -> None:
    """U+2028/U+2029 and the other breaks ``str.splitlines`` knows end a line for a reader
    that follows Unicode: neither a command's message nor a log line carries one raw."""
    from lkeval.text.untrusted import escape_data, one_line, shown_command

    value = "a\u2028::error::x\u2029b\x85c\x0bd\x0ce\x1cf"
    for text in (escape_data(value), one_line(value), shown_command(["lkeval", value])):
        assert len(text.splitlines()) == 1, text
    assert one_line("::error::x").startswith("\u200b")  # a leading command is broken
    assert shown_command(["a", "b\nc"]) == "a 'b\\x0ac'"
