"""``--debug`` and ``LKEVAL_DEBUG=1`` print the traceback of the error that ends ``lkeval``
(issue 30.7: an internal error said only its one line, with nothing to report a bug from);
without them the error stays one line. The traceback is masked like every other line."""

from __future__ import annotations

from pathlib import Path

import pytest

from lkeval.cli import main
from lkeval.errors import ExitCode


@pytest.mark.parametrize("how", ["flag", "env", "neither"])
def test_debug_prints_the_traceback_before_the_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    missing = tmp_path / "no-results.json"
    argv = ["report", "--results", str(missing), *(["--debug"] if how == "flag" else [])]
    monkeypatch.setenv("LKEVAL_DEBUG", "1" if how == "env" else "0")
    assert main(argv) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.rstrip().splitlines()[-1].startswith(f"lk-eval: {missing}"), err
    assert ("Traceback (most recent call last):" in err) == (how != "neither"), err
