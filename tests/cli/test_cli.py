"""The CLI's one error boundary: every exception class -> its documented code and one line.

Through the real parser and commands (``lkeval.cli.main``) where a user can cause the error,
and through :func:`lkeval.cli.report_error` for each exception class, so a new class
that forgets its code, or a traceback that leaks, fails here.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import clean_env

from lkeval.cli import BUG_TIP, COMMANDS, build_parser, main, report_error
from lkeval.errors import (
    ConfigError,
    ExitCode,
    InputFileError,
    LkevalError,
    OutputError,
    UsageError,
)
from lkeval.llm.config import LLMConfigError
from lkeval.results.results_json import ResultsFileError
from lkeval.scenarios.loader import ScenarioFileError
from lkeval.scenarios.yaml_nodes import Diagnostic


def _reported(exc: BaseException) -> tuple[ExitCode, list[str]]:
    out = io.StringIO()
    code = report_error(exc, out)
    return code, out.getvalue().splitlines()


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (UsageError("--env 'x': expected KEY=VALUE"), ExitCode.USAGE),
        (InputFileError("a.yaml:3: bad"), ExitCode.USAGE),
        (ConfigError("judge LLM needs a key"), ExitCode.USAGE),
        (LLMConfigError("judge LLM gpt at api.openai.com needs an API key"), ExitCode.USAGE),
        (ResultsFileError("r.json: no such results file"), ExitCode.USAGE),
        (OutputError("out/junit.xml", "No space left on device"), ExitCode.USAGE),
        (FileNotFoundError(2, "No such file or directory", "x.yaml"), ExitCode.USAGE),
        (KeyboardInterrupt(), ExitCode.INTERRUPTED),
    ],
)
def test_each_error_class_is_its_code_and_one_line(exc: BaseException, code: ExitCode) -> None:
    got, lines = _reported(exc)
    assert got == code
    assert lines[0].startswith("lk-eval: ") and "Traceback" not in "\n".join(lines)
    assert all(line.startswith("  tip: ") for line in lines[1:])  # at most a tip follows


def test_every_lkeval_error_subclass_has_a_documented_code() -> None:
    documented = set(ExitCode)
    seen = []
    stack: list[type[LkevalError]] = [LkevalError]
    while stack:
        cls = stack.pop()
        seen.append(cls)
        assert cls.exit_code in documented, cls
        stack.extend(cls.__subclasses__())
    assert {ScenarioFileError, ResultsFileError, LLMConfigError, OutputError} <= set(seen)


def test_a_scenario_file_error_lists_each_problem_on_its_own_line() -> None:
    diagnostics = [
        Diagnostic(
            file="s.yaml", line=3, column=5, field="scenarios[0].turn", message="unknown key"
        )
    ]
    code, lines = _reported(ScenarioFileError(diagnostics))
    assert code == ExitCode.USAGE
    assert lines[0] == "lk-eval: 1 error(s) in scenario files:" and "s.yaml:3" in lines[1]


def test_an_unexpected_exception_says_bug_and_is_one_line() -> None:
    code, lines = _reported(RuntimeError("boom\nsecond line"))
    assert code == ExitCode.INTERNAL
    assert lines == ["lk-eval: internal error: RuntimeError: boom second line", f"  tip: {BUG_TIP}"]


def test_the_boundary_masks_a_secret_in_a_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-boundary-canary-1234567890")
    _, lines = _reported(RuntimeError("POST https://x/?key=sk-boundary-canary-1234567890"))
    assert "sk-boundary-canary" not in "\n".join(lines)


def test_output_error_names_the_target_and_says_what_to_do() -> None:
    code, lines = _reported(OutputError("out/junit.xml", "No space left on device"))
    assert code == ExitCode.USAGE
    assert lines[0] == "lk-eval: out/junit.xml: cannot write: No space left on device"
    assert lines[1].startswith("  tip: ")


def test_signals_map_to_the_shells_codes() -> None:
    import signal

    assert ExitCode.for_signal(signal.SIGINT) == 130
    assert ExitCode.for_signal(signal.SIGTERM) == 143


# --- through the real commands ------------------------------------------------------------------


def test_report_has_no_boundary_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["report", "--results", str(tmp_path / "missing.json"), "--no-github"])
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE
    assert err.splitlines() == [f"lk-eval: {tmp_path / 'missing.json'}: no such results file"]


def test_a_bad_flag_value_is_exit_2_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run", "--agent", "a.py", "--scenarios", "s.yaml", "--boot-timeout", "soon"])
    assert info.value.code == ExitCode.USAGE
    assert "--boot-timeout" in capsys.readouterr().err


def test_secrets_on_the_command_line_are_masked_before_argparse_speaks(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 19.1: the runner must know a secret before the first line that could carry it,
    # and argparse quotes the value it refuses.
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    url = "postgres://u:flag-pass-1234@h/x"
    with pytest.raises(SystemExit) as stop:
        main(["run", "--env", f"DB={url}", "--concurrency", url])
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == "::add-mask::flag-pass-1234"
    assert "--concurrency" in err and "flag-pass-1234" not in err


def test_flags_are_not_abbreviated(capsys: pytest.CaptureFixture[str]) -> None:
    # The secret flags are found by their exact names before parsing; an abbreviation
    # (--github-tok) would carry a token past that.
    with pytest.raises(SystemExit) as stop:
        main(["report", "--results", "r.json", "--github-tok", "ghs_abbreviated_1"])
    assert stop.value.code == 2
    assert "unrecognized arguments: --github-tok" in capsys.readouterr().err


def test_merge_of_a_missing_file_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["merge", str(tmp_path / "nope.json"), "-o", str(tmp_path / "m.json")])
    assert code == ExitCode.USAGE and "no such results file" in capsys.readouterr().err


def test_every_registered_command_is_in_the_parser() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert len(COMMANDS) == len(sub.choices) == 7  # type: ignore[arg-type]
    expected = {"run", "dev", "validate", "report", "merge", "calibrate", "pin"}
    assert set(sub.choices) == expected  # type: ignore[arg-type]


def test_an_unwritable_results_path_stops_run_before_anything_boots(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    results = blocker / "sub" / "results.json"  # under a file: can never be written
    argv = ["--agent", __file__, "--scenarios", str(_scripted(tmp_path))]
    proc = _lkeval("run", *argv, "--results", str(results))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"lk-eval: {results}: cannot write: {blocker} is not a directory" in proc.stderr
    assert "Traceback" not in proc.stderr and "fork server" not in proc.stdout  # nothing booted


def _scripted(tmp_path: Path) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(
        "scenarios:\n  - label: hi\n    turns:\n      - user: hi\n"
        "        expect:\n          - message: {contains: x}\n",
        encoding="utf-8",
    )
    return path


def _lkeval(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lkeval", *argv],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
    )


def test_an_oversized_results_file_is_refused_before_it_is_parsed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fork's artifact is read by the privileged comment job: a huge one is exit 2, unread."""
    from lkeval.results.results_json import MAX_RESULTS_BYTES

    huge = tmp_path / "results.json"
    with huge.open("wb") as fh:  # valid JSON, so only the size can refuse it
        fh.write(b"{}")
        fh.write(b" " * MAX_RESULTS_BYTES)
    assert main(["report", "--results", str(huge)]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert str(huge) in err and "larger than 64 MiB" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--cassettes", "{file}"], "--cassettes {file}: is not a directory"),
        (["--junit", "/proc/lkeval-junit.xml"], "/proc/lkeval-junit.xml: cannot write: /proc"),
        (["--markdown", "/proc/self/x.md"], "/proc/self/x.md: cannot write: /proc/self"),
    ],
    ids=["cassettes-is-a-file", "junit-in-proc", "markdown-in-proc"],
)
def test_cassettes_and_report_paths_that_cannot_be_written_are_exit_2_before_boot(
    tmp_path: Path, flags: list[str], says: str
) -> None:
    """``access`` says yes to root in ``/proc``: the path is tried, not asked about."""
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    flags = [f.format(file=blocker) for f in flags]
    argv = ["--agent", __file__, "--scenarios", str(_scripted(tmp_path)), *flags]
    proc = _lkeval("run", *argv, "--results", str(tmp_path / "r" / "results.json"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert says.format(file=blocker) in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "fork server" not in proc.stdout  # nothing booted
    assert not list(tmp_path.rglob(".lkeval-probe-*"))
