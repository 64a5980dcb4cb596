"""The fault matrix: hostile input and broken machines each get a clear answer, never exit 4.

Each test is one fault from a review round (issue 19, 20): it would fail if the fault came
back. Faults about secrets live in test_canary.py, about processes in test_orphans.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import HOTEL, TEST_AGENTS, clean_env, hotel_env, read_json, run_argv, run_lkeval
from report_fixtures import run_results

from lkeval.cli import main
from lkeval.errors import ExitCode
from lkeval.results.results_json import MAX_RESULTS_CONTAINERS, MAX_RESULTS_DEPTH, dump_results
from lkeval.testing.llm_server import LLMServer


def _nested_results(tmp_path: Path, name: str, depth: int) -> Path:
    """A valid results file with ``depth`` nested lists under a metadata key a newer writer
    might add (a reader ignores keys it does not know)."""
    raw = json.loads(dump_results(run_results()))
    text = json.dumps(raw)
    value = "[" * depth + "]" * depth
    text = text.replace(
        '"git_branch": "feature/booking"', f'"x_newer": {value}, "git_branch": "feature/booking"', 1
    )
    assert value in text
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _reading(reader: str, path: Path, tmp_path: Path) -> list[str]:
    """The command line of each reader of a results file (report, --baseline, merge) that
    reads ``path`` (beside a good one where it needs two)."""
    good = tmp_path / "good.json"
    good.write_text(dump_results(run_results()), encoding="utf-8")
    return {
        "report": ["report", "--results", str(path)],
        "baseline": ["report", "--results", str(good), "--baseline", str(path)],
        "merge": ["merge", str(good), str(path), "-o", str(tmp_path / "merged.json")],
    }[reader]


@pytest.mark.parametrize("depth", [MAX_RESULTS_DEPTH, 100_000])
@pytest.mark.parametrize("reader", ["report", "baseline", "merge"])
def test_a_deeply_nested_results_file_is_exit_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reader: str, depth: int
) -> None:
    """A fork's artifact nested 100,000 deep once crashed ``lkeval report`` (RecursionError,
    exit 4); every reader of a results file (report, --baseline, merge) refuses it by name."""
    deep = _nested_results(tmp_path, "deep.json", depth)
    assert main(_reading(reader, deep, tmp_path)) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert str(deep) in err and f"nested more than {MAX_RESULTS_DEPTH} levels" in err
    assert "Traceback" not in err and "internal error" not in err


@pytest.mark.parametrize("reader", ["report", "baseline", "merge"])
def test_a_results_file_of_millions_of_empty_lists_is_exit_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reader: str
) -> None:
    """20 million empty lists in 60 MiB once took 3 GB and minutes to read (the depth walk
    allocated per value while the collector re-scanned them); refused before it is parsed."""
    raw = json.loads(dump_results(run_results()))
    flat = "[" + "[]," * MAX_RESULTS_CONTAINERS + "[]]"
    text = json.dumps(raw).replace('"git_branch": "feature/booking"', f'"git_branch": {flat}')
    wide = tmp_path / "wide.json"
    wide.write_text(text, encoding="utf-8")
    assert main(_reading(reader, wide, tmp_path)) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert str(wide) in err and f"more than {MAX_RESULTS_CONTAINERS:,} JSON arrays" in err


def test_a_results_file_nested_within_the_limit_is_read(tmp_path: Path) -> None:
    """The bound refuses only what lk-eval never writes: just under it reads (exit 0 or 1)."""
    path = _nested_results(tmp_path, "ok.json", MAX_RESULTS_DEPTH - 5)
    assert main(["report", "--results", str(path)]) in (ExitCode.PASSED, ExitCode.GATE_FAILED)


SCENARIO = """\
scenarios:
  - label: Books a room
    instructions: Book a double room.
    agent_expectations: The agent books a double room.
    {key}: {value}
"""


@pytest.mark.parametrize(
    ("key", "value", "wanted"),
    [
        ("repeat", "1000000", "from 1 to 1000"),
        ("repeat", "99999999999999999999999", "from 1 to 1000"),
        ("min_pass", "1001", "from 1 to 1000"),
        ("max_turns", "1000000", "from 1 to 1000"),
        ("boot_timeout", "1e999", "up to 3600"),
        ("turn_timeout", "86400", "up to 3600"),
        ("turn_timeout", ".nan", "up to 3600"),
    ],
)
@pytest.mark.parametrize("command", ["validate", "run"])
def test_an_unbounded_scale_in_a_scenario_file_is_exit_2_with_file_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    key: str,
    value: str,
    wanted: str,
) -> None:
    """``repeat: 1000000`` once passed validate and grew run to 3.4 GB; a 23-digit repeat
    crashed it (OverflowError, exit 4). validate and run refuse alike, naming file:line."""
    monkeypatch.chdir(tmp_path)
    Path("s.yaml").write_text(SCENARIO.format(key=key, value=value), encoding="utf-8")
    Path("agent.py").write_text("raise SystemExit('never imported')\n", encoding="utf-8")
    argv = ["validate", "s.yaml"]
    if command == "run":
        argv = ["run", "--agent", "agent.py", "--scenarios", "s.yaml", "--no-github"]
    assert main(argv) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "s.yaml:5:" in err and f"scenarios[0].{key}" in err and wanted in err, err
    assert "Traceback" not in err
    assert not Path("lkeval-results").exists()


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--repeat", "1000000"),
        ("--repeat", "99999999999999999999999"),
        ("--min-pass", "1001"),
        ("--max-turns", "1001"),
        ("--concurrency", "100000"),
        ("--boot-timeout", "inf"),
        ("--turn-timeout", "nan"),
        ("--llm-timeout", "1e999"),
        ("--llm-retries", "1000"),
        ("--rejudge", "21"),
        ("--agent-log-limit", "1000000"),
    ],
)
def test_an_unbounded_scale_flag_is_exit_2_naming_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flag: str,
    value: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("s.yaml").write_text(SCENARIO.format(key="repeat", value="1"), encoding="utf-8")
    argv = ["run", "--agent", "agent.py", "--scenarios", "s.yaml", "--no-github", flag, value]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == ExitCode.USAGE
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and "at most" in err, err
    assert not Path("lkeval-results").exists()


@pytest.mark.parametrize(
    ("name", "value"), [("LKEVAL_LLM_TIMEOUT", "inf"), ("LKEVAL_LLM_RETRIES", "99999")]
)
def test_an_unbounded_llm_setting_from_the_environment_is_exit_2_naming_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    value: str,
) -> None:
    """The flags' bounds hold for their environment variables too."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(name, value)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-secret")
    Path("s.yaml").write_text(SCENARIO.format(key="repeat", value="1"), encoding="utf-8")
    Path("agent.py").write_text("raise SystemExit('never imported')\n", encoding="utf-8")
    argv = ["run", "--agent", "agent.py", "--scenarios", "s.yaml", "--no-github"]
    assert main(argv) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert name in err and ("at most 3600" in err or "from 0 to 20" in err), err
    assert not Path("lkeval-results").exists()


def test_too_many_runs_in_total_is_exit_2_before_anything_boots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each scenario within its bound, the whole run not: refused with what to do instead."""
    monkeypatch.chdir(tmp_path)
    body = "".join(
        f"  - label: Scenario {i}\n    instructions: Say hi.\n    repeat: 1000\n"
        for i in range(101)
    )
    Path("s.yaml").write_text("scenarios:\n" + body, encoding="utf-8")
    Path("agent.py").write_text("raise SystemExit('never imported')\n", encoding="utf-8")
    assert main(["validate", "s.yaml"]) == ExitCode.PASSED
    argv = ["run", "--agent", "agent.py", "--scenarios", "s.yaml", "--no-github"]
    assert main(argv) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "101000 runs" in err and "at most 100000" in err and "--shard" in err, err
    assert not Path("lkeval-results").exists()


def _hotel_scripted(tmp_path: Path) -> Path:
    """Two of the example's scripted scenarios, without the parts that need a judge."""
    example = yaml.safe_load((HOTEL / "scenarios.yaml").read_text(encoding="utf-8"))
    scripted = [s for s in example["scenarios"] if "turns" in s][:2]
    for scenario in scripted:
        scenario.pop("agent_expectations", None)
        scenario.pop("instructions", None)
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"name": "Hotel", "scenarios": scripted}), encoding="utf-8")
    return path


@pytest.mark.e2e
def test_a_full_disk_names_each_file_prints_the_gate_and_is_never_exit_4(
    tmp_path: Path, hotel_llm: LLMServer
) -> None:
    """The results dir on a full file system once meant exit 4 ("internal error"), no gate
    line: an agent's log could not be published and the OSError ended the run. A real full
    file system: a 256 KiB tmpfs, filled, in a mount namespace of its own (nothing is left
    mounted, and no root is needed where user namespaces are allowed)."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    out = mnt / "out"
    argv = [
        *run_argv(HOTEL / "agent.py", _hotel_scripted(tmp_path), out / "results.json"),
        "--junit",
        str(out / "junit.xml"),
    ]
    script = (
        f"mount -t tmpfs -o size=256k tmpfs {mnt} && "
        f"(dd if=/dev/zero of={mnt}/filler bs=4k || true) 2>/dev/null && "
        f'exec "$0" -m lkeval "$@"'
    )
    unshare = ["unshare", "--mount"] + ([] if os.geteuid() == 0 else ["--map-root-user"])
    proc = subprocess.run(
        [*unshare, "sh", "-c", script, sys.executable, *argv],
        env=hotel_env(hotel_llm),
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == ExitCode.USAGE, proc.stdout + proc.stderr
    assert "lk-eval gate: passed" in proc.stdout, proc.stdout
    for name in ("results.json", "junit.xml"):
        assert f"{out / name}: cannot write: No space left on device" in proc.stderr
    assert "logs" in proc.stderr and "not written" in proc.stderr  # one warning for the logs
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr


SECRET = "sk-live-0123456789abcdef"


def test_an_agent_log_is_capped_with_a_marker_and_masked_across_batches(tmp_path: Path) -> None:
    """An agent flooding stdout once left a 1.1 GB log and grew lk-eval to 3.3 GB (the whole
    log masked at once): the published copy is masked a batch at a time, with a secret at
    every offset around a batch edge still masked, and stops at the cap with a marker."""
    from lkeval.agents import logs
    from lkeval.text.masking import register_secret

    raw = tmp_path / "raw.log"
    filler = b"z" * 999 + b"\n"
    with raw.open("wb") as fh:
        for shift in range(40):  # the secret's line crosses the 1 MiB batch edge at each offset
            fh.write(filler * (logs._BATCH_BYTES // 1000 - 1) + b"y" * (900 + shift) + b"\n")
            fh.write(b"key=" + SECRET.encode() + b" end\n")
        fh.write(b"pad " * (logs._LINE_BYTES // 3) + SECRET.encode() + b" tail\n")  # too long
    register_secret(SECRET)
    target = tmp_path / "logs" / "agent.log"
    raw.with_name("copy.log").write_bytes(raw.read_bytes())
    logs.publish_log(raw, target)
    text = target.read_text(encoding="utf-8")
    assert SECRET not in text and SECRET[:8] not in text
    assert text.count("key=*** end") == 40
    assert "[lk-eval: line longer than 64 KiB cut]" in text and "tail" not in text
    assert "log cut" not in text and not raw.exists()

    logs.publish_log(raw.with_name("copy.log"), target, limit=4 * 1024 * 1024)
    text = target.read_text(encoding="utf-8")
    assert text.endswith(
        "lk-eval: log cut at 4 MiB (lk-eval's limit per agent); the agent wrote 40 MiB\n"
    ), text[-300:]
    assert target.stat().st_size <= 4 * 1024 * 1024 + 200 and SECRET not in text


@pytest.mark.e2e
@pytest.mark.parametrize("start", ["warm", "cold"])
def test_a_runaway_agent_is_stopped_by_its_bounds_and_the_run_goes_on(
    tmp_path: Path, start: str
) -> None:
    """An agent writing 1 GiB to stdout once left a 1.1 GB log and 2 GB of disk, and nothing
    bounded an agent's memory: each is stopped at its bound, an error saying which, the
    published log is cut, and the scenarios beside it are unaffected."""
    rules = [
        {"model": "faulty-agent", "last_user": "flood", "tool_calls": [{"name": "flood"}]},
        {"model": "faulty-agent", "last_user": "hog", "tool_calls": [{"name": "hog"}]},
        {"model": "faulty-agent", "text": "Fine."},
    ]
    scenarios = tmp_path / "scenarios.yaml"
    said = [("flood", "please flood"), ("hog", "please hog"), ("plain", "hello")]
    scenarios.write_text(
        yaml.safe_dump(
            {
                "name": "Bounds",
                "scenarios": [
                    {"id": i, "label": i, "turns": [{"user": u, "expect": [{"message": {}}]}]}
                    for i, u in said
                ],
            }
        ),
        encoding="utf-8",
    )
    results = tmp_path / "out" / "results.json"
    argv = [
        *run_argv(TEST_AGENTS / "faulty_agent.py", scenarios, results),
        "--agent-memory",
        "700",
        "--agent-log-limit",
        "8",
        "--boot-timeout",
        "90",
        *(["--cold-start"] if start == "cold" else []),
    ]
    with LLMServer(rules) as llm:
        proc = run_lkeval(argv, clean_env(OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="k"))
    assert proc.returncode == ExitCode.GATE_FAILED, proc.stdout + proc.stderr
    by_id = {s["scenario_id"]: s for s in read_json(results)["scenarios"]}
    flood, hog = by_id["flood"], by_id["hog"]
    assert flood["status"] == "error" and "more than 8 MiB of log" in flood["reason"], flood
    assert hog["status"] == "error" and "more than its 700 MiB" in hog["reason"], hog
    assert "--agent-memory" in hog["reason"] and by_id["plain"]["status"] == "passed"
    log = Path(flood["attempts"][0]["log_path"])
    assert log.stat().st_size <= 8 * 1024 * 1024 + 200
    assert "lk-eval: log cut at 8 MiB" in log.read_text(encoding="utf-8")[-300:]


def test_a_hostile_cassette_is_its_attempts_error_and_the_run_still_reports(
    tmp_path: Path,
) -> None:
    """A cassette nested 200,000 deep once reached a RecursionError: in ``replay`` it is that
    attempt's error naming the file (before its agent boots), the other scenario's symlinked
    cassette too, and results.json and JUnit are written; never exit 4."""
    scenarios = tmp_path / "s.yaml"
    scenarios.write_text(
        "scenarios:\n"
        "  - {id: deep, label: deep, turns: [{user: hi, expect: [{message: {}}]}]}\n"
        "  - {id: linked, label: linked, turns: [{user: hi, expect: [{message: {}}]}]}\n",
        encoding="utf-8",
    )
    cassettes = tmp_path / "cassettes"
    cassettes.mkdir()
    (cassettes / "deep.json").write_text("[" * 200_000 + "]" * 200_000)
    (tmp_path / "elsewhere.json").write_text("{}")
    (cassettes / "linked.json").symlink_to(tmp_path / "elsewhere.json")
    results = tmp_path / "out" / "results.json"
    argv = run_argv(HOTEL / "agent.py", scenarios, results)
    argv += ["--cassettes", str(cassettes), "--cassette-mode", "replay", "--cold-start"]
    argv += ["--junit", str(tmp_path / "out" / "junit.xml"), "--no-github"]
    proc = run_lkeval(argv, clean_env(), timeout=240, cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr  # every attempt an error
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    reasons = {s["scenario_id"]: s["reason"] for s in read_json(results)["scenarios"]}
    assert f"cassette {cassettes / 'deep.json'} is not one lk-eval wrote" in reasons["deep"]
    assert "nested more than 200 levels deep" in reasons["deep"]
    assert f"cassette {cassettes / 'linked.json'} is a symlink" in reasons["linked"]
    assert (tmp_path / "out" / "junit.xml").exists()
