"""The Masker, and that no reporter output leaks a secret placed in transcripts and reasons."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import pytest
from report_fixtures import ERRORED, FAILED, msg, results_of, run_results

from lkeval.publish.files import write_text
from lkeval.publish.progress import make_progress
from lkeval.reporters import REPORTER_BY_NAME, build_report
from lkeval.results.gate import evaluate_gate
from lkeval.results.model import Attempt, RunResults
from lkeval.text.masking import (
    Masker,
    is_secret_name,
    process_masker,
    redact_argv,
    register_argv,
    url_passwords,
)

OPENAI = "sk-test-4f8a9b2c1d0e"
LIVEKIT = 'lk_secret_Zq8&<x>"9'  # characters that reporters escape
PASSWORD = "hunter2hunter2"


def test_collects_secret_looking_variables_only() -> None:
    masker = Masker.from_environ(
        {
            "OPENAI_API_KEY": OPENAI,
            "LIVEKIT_API_SECRET": LIVEKIT,
            "db_password": PASSWORD,
            "GITHUB_TOKEN": "ghs_abcdef123456",
            "SHORT_KEY": "abc12",  # under 6 characters: ignored
            "HOME": "/home/runner/work",  # not a secret name
        }
    )
    assert set(masker.secrets) == {OPENAI, LIVEKIT, PASSWORD, "ghs_abcdef123456"}
    assert masker.mask("home is /home/runner/work, key abc12") == (
        "home is /home/runner/work, key abc12"
    )


def test_is_secret_name() -> None:
    assert is_secret_name("LIVEKIT_API_KEY") and is_secret_name("my_token")
    assert not is_secret_name("GITHUB_REPOSITORY")


def test_mask_replaces_plain_and_escaped_forms() -> None:
    masker = Masker([LIVEKIT, None, ""])
    masker.add("short")
    assert masker.secrets == (LIVEKIT,)
    assert masker.mask(f"a {LIVEKIT} b") == "a *** b"
    assert masker.mask("x lk_secret_Zq8&amp;&lt;x&gt;&quot;9 y") == "x *** y"
    assert masker.mask('x lk_secret_Zq8&<x>\\"9 y') == "x *** y"


def test_redact_argv() -> None:
    argv = ["run", "--github-token", "ghp_x1y2z3w4", "--github-token=ghp_abc", "--junit", "j"]
    assert redact_argv(argv) == (
        "run",
        "--github-token",
        "***",
        "--github-token=***",
        "--junit",
        "j",
    )


def test_overlapping_secrets_mask_the_longest() -> None:
    masker = Masker(["abcdefgh", "abcdefghijkl"])
    assert masker.mask("abcdefghijkl abcdefgh") == "*** ***"


def test_multiline_secret_masked_line_by_line() -> None:
    masker = Masker(["-----BEGIN KEY-----\nAAAABBBBCCCC\n-----END KEY-----"])
    assert masker.mask("leaked AAAABBBBCCCC here") == "leaked *** here"


def test_mask_results_copies_the_model() -> None:
    results = results_of(replace(FAILED, reason=f"used {OPENAI}"))
    masked = Masker([OPENAI]).mask_results(results)
    assert masked.scenarios[0].reason == "used ***"
    assert results.scenarios[0].reason == f"used {OPENAI}"  # original untouched


@pytest.fixture
def leaky_results() -> RunResults:
    leak = f"{OPENAI} {LIVEKIT} {PASSWORD}"
    failed = replace(
        FAILED,
        reason=f"judge saw {leak}",
        attempts=(
            replace(
                FAILED.attempts[0],
                transcript=(
                    msg(1, "user", f"my key is {leak}"),
                    *FAILED.attempts[0].transcript,
                ),
            ),
        ),
    )
    errored = replace(
        ERRORED,
        attempts=(Attempt(status="error", reason=leak, log_tail=(f"env: {leak}",)),),
    )
    return results_of(failed, errored, *run_results().scenarios[:1])


def test_no_reporter_output_contains_a_secret(
    monkeypatch: pytest.MonkeyPatch, leaky_results: RunResults, tmp_path: Path
) -> None:
    # Nobody hands a masker down: reporters, progress and files mask with the process's one,
    # which knows the environment (a writer given an empty masker once masked nothing).
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI)
    monkeypatch.setenv("LIVEKIT_API_SECRET", LIVEKIT)
    monkeypatch.setenv("DB_PASSWORD", PASSWORD)
    results = leaky_results
    gate = evaluate_gate(results, None)
    report = build_report(results, None, gate)
    write_text(tmp_path / "f.txt", f"raw {OPENAI}")
    assert (tmp_path / "f.txt").read_text(encoding="utf-8") == "raw ***"
    for name, cls in REPORTER_BY_NAME.items():
        out = cls().format(report)
        assert "***" in out, name
        for secret in (OPENAI, LIVEKIT, PASSWORD, "lk_secret_Zq8&amp;", "Zq8&lt;x"):
            assert secret not in out, (name, secret)

    stream = io.StringIO()
    for github in (True, False):
        progress = make_progress(stream, github)
        for scenario in results.scenarios:
            progress.scenario_finished(scenario)
    assert "***" in stream.getvalue()
    assert OPENAI not in stream.getvalue() and LIVEKIT not in stream.getvalue()


# --- one boundary: fragments, mask-before-cut, the process's registered secrets -------------

CANARY = "sk-canary-7Qm2Xv9Lp4Rt8Wz1Kd6N"  # 31 characters, like the key of issue 11


def test_a_cut_secret_is_masked_before_the_cut() -> None:
    masker = Masker([CANARY])
    text = "x" * 100 + CANARY
    clipped = masker.clip(text, 120)
    assert clipped.endswith("***") and "sk-canary" not in clipped
    naive = masker.mask(text[:120])  # the old order: cut, then mask
    assert CANARY[:19] not in naive  # fragments of 12+ characters are masked anyway


@pytest.mark.parametrize("start,end", [(0, 29), (2, 31), (5, 17), (9, 30)])
def test_long_fragments_of_a_secret_are_masked(start: int, end: int) -> None:
    fragment = CANARY[start:end]
    out = Masker([CANARY]).mask(f"before {fragment} after")
    assert out == "before *** after"


def test_short_fragments_and_unrelated_text_stay() -> None:
    masker = Masker([CANARY])
    short = CANARY[3:14]  # 11 characters: too short to be specific
    assert masker.mask(f"a {short} b") == f"a {short} b"
    assert masker.mask("sk-canary is a prefix") == "sk-canary is a prefix"


def test_fragment_in_an_escaped_form_is_masked() -> None:
    secret = 'pw<&>"with-quotes-and-more'
    masker = Masker([secret])
    escaped = 'pw&lt;&amp;&gt;"with-quotes-and-m'  # HTML-escaped, then cut
    assert "with-quotes" not in masker.mask(f"x {escaped}")


def test_process_masker_knows_env_flags_secret_env_and_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lkeval.text.masking import process_masker, register_environ, register_secret

    monkeypatch.setenv("OPENAI_API_KEY", OPENAI)
    monkeypatch.setenv("MY_PLAIN_VALUE", "shown-as-it-is")
    monkeypatch.setenv("DEPLOY_HOOK", "opaque-hook-value-123")
    register_environ(
        {"STRIPE_SECRET_KEY": "sk_live_abcdef123456", "FEATURE": "on-for-everyone"},
        names=["DEPLOY_HOOK"],
    )
    register_secret("ghs_token_value_42")
    masker = process_masker()
    text = (
        f"{OPENAI} sk_live_abcdef123456 opaque-hook-value-123 ghs_token_value_42 "
        "on-for-everyone shown-as-it-is"
    )
    assert masker.mask(text) == "*** *** *** *** on-for-everyone shown-as-it-is"
    assert process_masker() is masker  # one masker, built once: not per call, not per writer


def test_url_passwords_and_paths(tmp_path: object) -> None:
    masker = Masker.from_environ(
        {
            "DATABASE_URL": "postgres://app:s3cr3t-pass-word@db:5432/x",
            "SSH_KEY_PATH": "/",  # an existing path is not a secret
            "TRUE_TOKEN": "true",  # too short to be specific
        }
    )
    assert masker.secrets == ("s3cr3t-pass-word",)


def test_redact_argv_hides_secret_env_values() -> None:
    argv = ["run", "--env", "STRIPE_SECRET_KEY=sk_live_x", "--env=MODE=fast", "--env", "A_TOKEN=t"]
    assert redact_argv(argv) == (
        "run",
        "--env",
        "STRIPE_SECRET_KEY=***",
        "--env=MODE=fast",
        "--env",
        "A_TOKEN=***",
    )


@pytest.mark.parametrize(
    ("value", "passwords"),
    [
        ("postgres://app:s3cr3t-pass-word@db:5432/x", ["s3cr3t-pass-word"]),
        # issue 19.1: a URL inside a value (an --env pair inside the extra-args input)
        ("--env DB=postgres://u:PASSWORD-19-1@h/x --judge-model m", ["PASSWORD-19-1"]),
        (
            "https://a:first-pass@x/simple https://b:second-pass@y/simple",
            ["first-pass", "second-pass"],
        ),
        ("https://u:p%40ss-word-9@h/", ["p%40ss-word-9", "p@ss-word-9"]),
        ("https://u:p@ss-word-9@h/", ["p@ss-word-9"]),
        ("https://user@host/x https://host:8080/x mailto:a@b", []),
    ],
)
def test_url_passwords_anywhere_in_a_value(value: str, passwords: list[str]) -> None:
    assert url_passwords(value) == passwords


def test_register_argv_knows_what_the_command_line_carries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEPLOY_HOOK", "opaque-hook-value-123")
    register_argv(
        [
            "run",
            "--env",
            "DB=postgres://u:url-password-42@h/x",  # issue 19.1: a plain name, a URL password
            "--env=STRIPE_SECRET_KEY=sk_live_abcdef123456",
            "--env",
            "MODE=fast-and-visible",
            "--secret-env",
            "DEPLOY_HOOK",
            "--github-token=ghs_token_value_42",
            "--judge-base-url",
            "https://judge:judge-pass-77@llm.example/v1",
        ]
    )
    masker = process_masker()
    assert set(masker.secrets) == {
        "url-password-42",
        "sk_live_abcdef123456",
        "opaque-hook-value-123",
        "ghs_token_value_42",
        "judge-pass-77",
    }
    argv = ["run", "--env", "DB=postgres://u:url-password-42@h/x", "--env", "MODE=fast"]
    assert redact_argv(argv) == ("run", "--env", "DB=postgres://u:***@h/x", "--env", "MODE=fast")


# --- agent logs: published masked and without colours, or not at all ------------------------


def test_agent_log_is_published_masked_without_colours(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lkeval.agents import logs as agent_logs
    from lkeval.agents.process import publish_log, publish_pending_logs
    from lkeval.text.masking import register_secret

    work, logs = Path(str(tmp_path)) / "work", Path(str(tmp_path)) / "logs"
    work.mkdir()
    raw = work / "s1.log"
    raw.write_bytes(f"\x1b[32mINFO\x1b[0m key={CANARY} cut={CANARY[:20]}\n".encode())
    register_secret(CANARY)  # the process's one masker, nobody hands a filter down
    publish_log(raw, logs / "s1.log")
    assert (logs / "s1.log").read_text() == "INFO key=*** cut=***\n"
    assert not raw.exists()

    def broken(text: str) -> str:
        raise RuntimeError("masker failed")

    (work / "s2.log").write_text(f"key={CANARY}\n")
    (work / "s3.log").write_text(f"key={CANARY}\n")
    monkeypatch.setattr(agent_logs, "mask", broken)
    publish_pending_logs(work, logs)
    for name in ("s2.log", "s3.log"):
        text = (logs / name).read_text()
        assert CANARY not in text and "could not be masked" in text
    assert not list(work.iterdir())
