"""Typed, frozen options built from argv once, at the top; nothing below ``cli/`` sees argparse.

Each option is a named field with its default from :mod:`lkeval.defaults` (the flags in
:mod:`lkeval.cli.flags` take their defaults and help texts from these classes), so grep can
follow ``judge_model`` from the flag to the code that uses it. Environment defaults that belong
to the command line (``GITHUB_ACTIONS``, ``GITHUB_TOKEN``) are resolved here too.

The generic argument types (``seconds`` ...) live here as well: argparse calls them at
parse time, so a typo exits 2 before any agent boots.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from lkeval import defaults
from lkeval.audio.impair import parse_impairments
from lkeval.errors import UsageError
from lkeval.llm.config import LLMEndpointOptions, LLMOptions, parse_price
from lkeval.publish.github.comments import CommentMode, marker
from lkeval.replay.manifest import Trusted
from lkeval.results.gate import FailOn
from lkeval.results.history import DEFAULT_WINDOW as DEFAULT_HISTORY_RUNS
from lkeval.results.metrics import Budgets
from lkeval.results.pricing import parse_price_override
from lkeval.results.sampling import SequentialRule
from lkeval.scenarios.bounds import MAX_TIMEOUT_SECONDS
from lkeval.scenarios.latency import parse_latency_flag
from lkeval.scenarios.model import BUILTIN_JUDGES

T = TypeVar("T")


@dataclass(frozen=True)
class ReportOptions:
    """Reports and the merge gate: shared by ``lkeval run`` and ``lkeval report``."""

    files: tuple[tuple[str, str], ...] = ()
    """(reporter name, path) for each ``--<reporter> PATH`` given (``--junit``, ``--markdown``)."""
    baseline: str | None = None
    """A results file, or ``github:BRANCH`` (fetched from that branch's latest run)."""
    baseline_artifact: str = defaults.BASELINE_ARTIFACT
    history_runs: int = DEFAULT_HISTORY_RUNS
    """Runs of the baseline's pass-rate history to judge failures against (and to carry)."""
    fail_on: FailOn = "any"
    min_pass_rate: float | None = None
    budgets: Budgets = field(default_factory=Budgets)
    """--max-latency, --max-cost, --latency-regression, --cost-regression (all off: no budget)."""
    allow_nothing_to_check: bool = False
    """Do not fail on scenarios with nothing to check (they are never played either way)."""
    catch: tuple[float, float] | None = None
    """``--catch BROKEN:CHANCE``: the sequential test's sensitivity (None: the defaults)."""
    allow_all_quarantined: bool = False
    """Pass a run whose every scenario that ran is quarantined (by default: no scenario
    counted toward the gate, so it fails)."""
    comment: CommentMode = "update"
    comment_id: str = "default"
    title: str | None = None
    """The reports' heading; None: lk-eval, plus the comment id when not the default."""
    comment_author: str | None = None
    """Who the token posts as, when GitHub cannot say (a GitHub App: SLUG[bot])."""
    github: bool = False
    """GitHub Actions output (annotations, summary, outputs, comment)."""
    github_token: str | None = field(default=None, repr=False)
    summary: bool = True
    """Append to $GITHUB_STEP_SUMMARY (only with ``github``)."""
    pr: int | None = None

    def file(self, reporter: str) -> str | None:
        """Where the ``reporter``'s file goes, or None when it was not asked for."""
        return dict(self.files).get(reporter)


@dataclass(frozen=True)
class RunOptions:
    """Everything ``lkeval run`` was told."""

    agent: str
    scenarios: tuple[str, ...]
    results: str = defaults.RESULTS
    logs_dir: str | None = None
    """One log per agent process; None: ``logs/`` beside ``results``."""
    python: str = sys.executable
    env: tuple[tuple[str, str], ...] = ()
    secret_env: tuple[str, ...] = ()
    """``--secret-env NAME``: variables whose values are secrets whatever their names."""
    boot_timeout: float = defaults.BOOT_TIMEOUT
    turn_timeout: float = defaults.TURN_TIMEOUT
    concurrency: int | None = None
    """None: :func:`lkeval.defaults.default_concurrency`."""
    repeat: int | None = None
    min_pass: int | None = None
    max_attempts: int = SequentialRule.max_attempts
    """The sequential test's cap on one scenario's attempts (``--max-attempts``)."""
    max_run_attempts: int | None = None
    """Attempts the run may start in all (None: RUN_ATTEMPTS_PER_SCENARIO per scenario)."""
    max_errors: int = defaults.MAX_ERRORS
    agent_memory: int = defaults.AGENT_MEMORY_MIB
    """MiB of resident memory one agent may use before it is stopped (an error); 0: no bound."""
    agent_log_limit: int = defaults.AGENT_LOG_MIB
    """MiB of log one agent may write before it is stopped; its published log is cut there."""
    """Stop booting when the first N scenarios fail alike on the agent's side (0: never)."""
    cold_start: bool = False
    inference_class: str = defaults.INFERENCE_CLASS
    """``--inference-class``: "low" (as LiveKit's text simulation pins it) or "agent"."""
    mode: str = defaults.MODE
    """``--mode``: text or audio, for scenarios without their own ``mode:``."""
    speech: str = defaults.SPEECH
    """``--speech``: agent (its own speech models), local (lk-eval's speech server, oracle STT)
    or local:pocketsphinx (the same, pocketsphinx recognizing)."""
    voice: str = defaults.VOICE
    """``--voice``: the caller's text-to-speech in audio mode."""
    impair: str = ""
    """``--impair``: the caller's line through noise, loss, jitter, a codec (checked)."""
    listen: str = ""
    """``--listen``: a speech-to-text for the agent's audio (what a caller heard)."""
    shard: tuple[int, int] | None = None
    tags: tuple[tuple[str, str], ...] = ()
    match: tuple[str, ...] = ()
    quarantine: tuple[tuple[str, str], ...] = ()
    cassettes: str | None = None
    """``--cassettes DIR``: record and replay each attempt's HTTP exchanges (None: off)."""
    cassette_mode: str = defaults.CASSETTE_MODE
    """``--cassette-mode``: auto, replay or record (only with ``cassettes``)."""
    cassette_rules: str | None = None
    """``--cassette-rules FILE``: the user's scrub rules for matching requests."""
    cassettes_from: str | None = None
    """``--cassettes-from github:BRANCH``: restore that branch's cassettes artifact first."""
    cassettes_artifact: str = defaults.CASSETTES_ARTIFACT
    cassettes_restored: tuple[Path, Trusted] | None = None
    """Set by lk-eval itself: where ``--cassettes-from`` unpacked the artifact (a fresh
    directory), and what of it may be replayed (its manifest)."""
    no_credentials: bool = False
    """Set by lk-eval itself, never a flag: a fork's pull request without LLM credentials,
    replaying its cassettes (only what replays in full is evaluated)."""
    llm: LLMOptions = field(default_factory=LLMOptions)
    report: ReportOptions = field(default_factory=ReportOptions)


# --- argument types: argparse calls them, a bad value is exit 2 naming the flag ----------------


def _argument_type(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse type from a parser that raises ValueError with a usable message."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__
    return convert


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise ValueError(f"{text!r} must be 0 or more")
    return value


def _positive_int(text: str) -> int:
    value = _non_negative_int(text)
    if value == 0:
        raise ValueError("must be 1 or more")
    return value


def _seconds(text: str) -> float:
    """A timeout: more than 0, finite and at most :data:`MAX_TIMEOUT_SECONDS` (nan, inf and
    1e999 are refused here, not met as a hang or an OverflowError later)."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not 0 < value <= MAX_TIMEOUT_SECONDS:
        raise ValueError(f"{text!r} must be more than 0 and at most {MAX_TIMEOUT_SECONDS:g}")
    return value


def _int_up_to(parse: Callable[[str], int], maximum: int) -> Callable[[str], int]:
    """An argparse type: what ``parse`` accepts, and at most ``maximum``."""

    def bounded(text: str) -> int:
        value = parse(text)
        if value > maximum:
            raise ValueError(f"{text!r} must be at most {maximum}")
        return value

    bounded.__name__ = parse.__name__.lstrip("_")
    return _argument_type(bounded)


def non_negative_int_up_to(maximum: int) -> Callable[[str], int]:
    """An argparse type: a whole number from 0 to ``maximum`` (see scenarios/bounds.py)."""
    return _int_up_to(_non_negative_int, maximum)


def positive_int_up_to(maximum: int) -> Callable[[str], int]:
    """An argparse type: a whole number from 1 to ``maximum`` (see scenarios/bounds.py)."""
    return _int_up_to(_positive_int, maximum)


def _judge_names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in BUILTIN_JUDGES]
    if unknown:
        raise ValueError(
            f"unknown judge(s) {', '.join(unknown)}; known: {', '.join(BUILTIN_JUDGES)}"
        )
    return names


def _price(text: str) -> str:
    parse_price(text)
    return text


def _pass_rate(value: str) -> float:
    text = value.strip()
    hint = f"{value!r}: give a fraction 0..1 or a percentage like 90%"
    try:
        rate = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ValueError(hint) from None
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"{hint} (0%..100%)")
    return rate


def _catch(value: str) -> tuple[float, float]:
    """``--catch BROKEN:CHANCE`` (``50%:90%``): catch a scenario broken in BROKEN of its
    conversations at least CHANCE of the time (docs/sampling.md)."""
    hint = f"{value!r}: give BROKEN:CHANCE, e.g. 50%:90% (a 50%-broken scenario caught 90%)"
    broken, sep, chance = value.partition(":")
    if not sep:
        raise ValueError(hint)
    share, catch = _pass_rate(broken), _pass_rate(chance)
    if not 1 - SequentialRule.fine < share < 1 or not 0.5 <= catch < 1:
        raise ValueError(f"{hint}: BROKEN above 5% and below 100%, CHANCE 50% to below 100%")
    return share, catch


parse_catch = _argument_type(_catch)


def sensitivity_rule(catch: tuple[float, float] | None, max_attempts: int) -> SequentialRule:
    """The sequential rule of ``--catch BROKEN:CHANCE`` (None: the defaults) and the cap: its
    broken hypothesis is a scenario broken in BROKEN of its conversations, missed at most
    1 - CHANCE of the time (the test's beta)."""
    if catch is None:
        return SequentialRule(max_attempts=max_attempts)
    share, chance = catch
    return SequentialRule(
        broken=round(1 - share, 6), beta=round(1 - chance, 6), max_attempts=max_attempts
    )


def _usd(text: str) -> float:
    try:
        value = float(text.strip().removeprefix("$"))
    except ValueError:
        value = -1.0
    if value < 0:
        raise ValueError(f"{text!r}: give USD per run, e.g. 2.50")
    return value


def _percent(text: str) -> float:
    raw = text.strip()
    try:
        value = float(raw.removesuffix("%")) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        value = -1.0
    if value < 0:
        raise ValueError(f"{text!r}: give a percentage like 20% or 0.2")
    return value


def _comment_id(value: str) -> str:
    marker(value)  # raises ValueError for an id that cannot be a hidden marker
    return value


non_negative_int = _argument_type(_non_negative_int)
seconds = _argument_type(_seconds)
parse_judge_names = _argument_type(_judge_names)
"""``"safety, tool_use"`` → ``("safety", "tool_use")``, rejecting unknown names."""
price = _argument_type(_price)
parse_pass_rate = _argument_type(_pass_rate)
"""``0.9`` or ``90%`` → 0.9."""
parse_comment_id = _argument_type(_comment_id)
price_override = _argument_type(parse_price_override)
"""``MODEL=IN,OUT`` of ``--price``."""
latency_budget = _argument_type(parse_latency_flag)
usd = _argument_type(_usd)
percent = _argument_type(_percent)


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` → (2, 4); 1-based, as CI matrices usually count."""
    index, sep, total = text.partition("/")
    try:
        i, n = int(index), int(total)
    except ValueError:
        raise ValueError(f"expected I/N like 1/4, got {text!r}") from None
    if not sep or n < 1 or not 1 <= i <= n:
        raise ValueError(f"expected I/N with 1 <= I <= N, got {text!r}")
    return i, n


def parse_tag_selector(text: str) -> tuple[str, str]:
    """``key=value`` → (key, value); raises ValueError with a usable message."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def _impairments(text: str) -> str:
    """``--impair``: checked now (a bad field is a usage error naming it), kept as written."""
    try:
        parse_impairments(text)
    except UsageError as exc:
        raise ValueError(str(exc).removeprefix("--impair: ")) from None
    return text


shard = _argument_type(parse_shard)
tag = _argument_type(parse_tag_selector)
impairments = _argument_type(_impairments)


# --- from argv to options ----------------------------------------------------------------------


def llm_options(args: argparse.Namespace) -> LLMOptions:
    """The LLM flags of ``lkeval run``."""
    return LLMOptions(
        caller=LLMEndpointOptions(
            model=args.caller_model, base_url=args.caller_base_url, price=args.caller_price
        ),
        judge=LLMEndpointOptions(
            model=args.judge_model, base_url=args.judge_base_url, price=args.judge_price
        ),
        judges=tuple(args.judges),
        rejudge=args.rejudge,
        maybe_is_pass=args.maybe_is_pass,
        allow_weak_judge=args.allow_weak_judge,
        max_turns=args.max_turns,
        retries=args.llm_retries,
        timeout=args.llm_timeout,
        caller_temperature=args.caller_temperature,
        prices=tuple(args.price),
    )


def report_options(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> ReportOptions:
    """The report and gate flags; ``--github`` defaults to whether this is GitHub Actions."""
    env = os.environ if environ is None else environ
    github = args.github if args.github is not None else env.get("GITHUB_ACTIONS") == "true"
    return ReportOptions(
        files=tuple(sorted(args.report_files.items())),
        baseline=args.baseline,
        history_runs=args.history_runs,
        baseline_artifact=args.baseline_artifact,
        fail_on=args.fail_on,
        min_pass_rate=args.min_pass_rate,
        budgets=Budgets(
            latency=args.max_latency or {},
            max_cost_usd=args.max_cost,
            latency_regression=args.latency_regression,
            cost_regression=args.cost_regression,
        ),
        allow_nothing_to_check=args.allow_nothing_to_check,
        allow_all_quarantined=args.allow_all_quarantined,
        catch=getattr(args, "catch", None),
        comment=args.comment,
        comment_id=args.comment_id,
        title=args.title,
        comment_author=args.comment_author,
        github=github,
        github_token=args.github_token or env.get("GITHUB_TOKEN") or None,
        summary=args.summary is not False,
        pr=args.pr,
    )


def run_options(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> RunOptions:
    """Everything ``lkeval run`` needs, from its parsed flags."""
    return RunOptions(
        agent=args.agent,
        scenarios=tuple(args.scenarios),
        results=args.results,
        logs_dir=args.logs_dir,
        python=args.python,
        env=tuple(args.env),
        secret_env=tuple(args.secret_env),
        boot_timeout=args.boot_timeout,
        turn_timeout=args.turn_timeout,
        concurrency=args.concurrency,
        repeat=args.repeat,
        min_pass=args.min_pass,
        max_attempts=args.max_attempts,
        max_run_attempts=args.max_run_attempts,
        max_errors=args.max_errors,
        agent_memory=args.agent_memory,
        agent_log_limit=args.agent_log_limit,
        cold_start=args.cold_start,
        inference_class=args.inference_class,
        mode=args.mode,
        speech=speech_option(args.speech),
        voice=args.voice,
        impair=args.impair,
        listen=args.listen,
        shard=args.shard,
        tags=tuple(args.tag),
        match=tuple(args.match),
        quarantine=tuple(args.quarantine),
        cassettes=args.cassettes,
        cassette_mode=cassette_mode(args),
        cassette_rules=args.cassette_rules,
        cassettes_from=cassettes_from(args),
        cassettes_artifact=args.cassettes_artifact,
        llm=llm_options(args),
        report=report_options(args, environ),
    )


def cassette_mode(args: argparse.Namespace) -> str:
    """``--cassette-mode`` (default auto); it and ``--cassette-rules`` need ``--cassettes``:
    a mode without a directory would silently run live."""
    if args.cassettes is None:
        for flag, value in (
            ("--cassette-mode", args.cassette_mode),
            ("--cassette-rules", args.cassette_rules),
        ):
            if value is not None:
                raise UsageError(f"{flag} needs --cassettes DIR")
    return str(args.cassette_mode or defaults.CASSETTE_MODE)


def cassettes_from(args: argparse.Namespace) -> str | None:
    """``--cassettes-from github:[BRANCH]``, which needs ``--cassettes`` (where to put them)."""
    spec = args.cassettes_from
    if spec is None:
        return None
    if args.cassettes is None:
        raise UsageError("--cassettes-from needs --cassettes DIR")
    if not spec.startswith("github:"):
        raise UsageError(f"--cassettes-from: {spec!r} is not github:BRANCH (or github: alone)")
    return str(spec)


def env_pair(item: str) -> tuple[str, str]:
    """``KEY=VALUE`` of ``--env`` (argparse type)."""
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{item!r}: expected KEY=VALUE")
    return key, value


__all__ = [
    "LLMEndpointOptions",
    "LLMOptions",
    "ReportOptions",
    "RunOptions",
    "cassette_mode",
    "cassettes_from",
    "env_pair",
    "llm_options",
    "non_negative_int",
    "non_negative_int_up_to",
    "parse_catch",
    "parse_comment_id",
    "parse_judge_names",
    "parse_pass_rate",
    "positive_int_up_to",
    "price",
    "report_options",
    "run_options",
    "seconds",
    "sensitivity_rule",
    "shard",
    "tag",
]


def speech_option(speech: str) -> str:
    """``--speech``, with the optional recognizer it names installed (a clear error before any
    agent boots, not a failed call per scenario)."""
    if speech == "local:pocketsphinx" and importlib.util.find_spec("pocketsphinx") is None:
        raise UsageError(
            "--speech local:pocketsphinx needs pocketsphinx: pip install 'lk-eval[speech]'"
        )
    return speech
