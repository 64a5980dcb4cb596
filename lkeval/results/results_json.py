"""The results file, written and read: the result model plus the figures the reports show.

Each scenario keeps its raw per-turn metrics (``attempts[].turns``): the gate, the baseline diff
and a later ``lkeval report`` recompute everything from them. Beside them the file carries the
figures every report shows (turn latency and TTFT as p50/p95/max, tool time, turns, cost), per
scenario and for the suite, so a dashboard or a script reads them instead of re-implementing
nearest-rank percentiles and pricing. They are derived data: :func:`load_results` ignores
them, so a hand-edited figure changes no verdict. :func:`load_results` reads what any lk-eval
of the same format version wrote, field by field, ignoring keys it does not know (a newer
writer), and refuses what a fork's artifact could abuse (size, depth). ``docs/results.md``
describes the file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, fields, is_dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from lkeval.errors import InputFileError
from lkeval.results.history import MAX_WINDOW, HistoryRate, digests, rate_of, scenario_entry
from lkeval.results.metrics import Metrics, Spread, scenario_metrics, suite_metrics
from lkeval.results.model import FORMAT_VERSION, RunResults
from lkeval.startup import paused_collections
from lkeval.text.bounded_json import MAX_DEPTH, depth_over


def figures(metrics: Metrics) -> dict[str, Any]:
    """The JSON form of what a report shows for ``metrics`` (None where nothing was measured)."""
    return {
        "turns": metrics.turns,
        "latency_ms": _spread(metrics.latency),
        "ttft_ms": _spread(metrics.ttft),
        "first_audio_ms": _spread(metrics.first_audio),
        "e2e_latency_ms": _spread(metrics.e2e),
        "tool_ms": _spread(metrics.tools),
        "cost_usd": metrics.cost_usd,
        "unpriced": list(metrics.unpriced),
    }


def _spread(value: Spread | None) -> dict[str, float] | None:
    if value is None:
        return None
    return {"p50": value.p50, "p95": value.p95, "max": value.max, "n": value.n}


def history_figures(rate: HistoryRate | None) -> dict[str, Any] | None:
    """A scenario's pass rate over the history the run was compared with (None without
    enough of it)."""
    if rate is None:
        return None
    return {
        "passes": rate.passes,
        "attempts": rate.attempts,
        "runs": rate.runs,
        "rate": round(rate.rate, 6),
        "wilson_95": [round(rate.low, 6), round(rate.high, 6)],
        "state": rate.state,
    }


def results_document(results: RunResults) -> dict[str, Any]:
    """The JSON-ready results file: the model, with ``figures`` for the suite and each scenario
    (placed before the attempts, so a reader sees them first)."""
    data = results_to_dict(results)
    history = data.pop("history")
    now = digests(results)
    scenarios = []
    for result, raw in zip(results.scenarios, data.pop("scenarios"), strict=True):
        attempts = raw.pop("attempts")
        entry = scenario_entry(results.history, result.scenario_id, now.get(result.scenario_id))
        scenarios.append(
            {
                **raw,
                "figures": figures(scenario_metrics(result)),
                "history_rate": history_figures(rate_of(entry)),
                "attempts": attempts,
            }
        )
    return {
        **data,
        "figures": figures(suite_metrics(results)),
        "scenarios": scenarios,
        "history": history,
    }


def dump_results(results: RunResults) -> str:
    """Serialise results as pretty JSON (stable key order, UTF-8 kept readable)."""
    return json.dumps(results_document(results), indent=2, ensure_ascii=False) + "\n"


class ResultsFileError(InputFileError):
    """A results file that cannot be read (missing, not JSON, wrong format)."""


def results_to_dict(results: RunResults) -> dict[str, Any]:
    """The JSON-ready form of a run's results."""
    data = asdict(results)
    data = {"format_version": data.pop("format_version"), **data}
    return data


#: A results file is read by privileged jobs (the fork-safe ``workflow_run`` recipe) from an
#: artifact a fork's code wrote: a larger one is refused before it is parsed. Real files are a
#: few MiB (300 scenarios with transcripts: ~3 MiB).
MAX_RESULTS_BYTES = 64 * 1024 * 1024
#: Nesting a results file may have: lk-eval writes about ten levels plus the scenario's own
#: values (``userdata``, function arguments: at most 100 deep, see scenarios/bounds.py).
#: A deeper file is refused, so no reader below (the masker, the comparison) ever recurses
#: through a fork's 100,000 brackets.
MAX_RESULTS_DEPTH = MAX_DEPTH
#: Arrays and objects a results file may hold, counted as ``[`` and ``{`` bytes before it is
#: parsed (brackets inside strings count too: an upper bound). lk-eval writes one per ~120
#: bytes, about 550,000 in a file at the size bound; 20 million empty lists in 60 MiB took
#: 3 GB and minutes to read.
MAX_RESULTS_CONTAINERS = 2_000_000


def load_results(path: str | Path) -> RunResults:
    """Read a results file written by any lk-eval of the same format version."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_RESULTS_BYTES + 1)
        if len(data) > MAX_RESULTS_BYTES:
            raise ResultsFileError(
                f"{path}: larger than {MAX_RESULTS_BYTES // (1024 * 1024)} MiB: "
                "not a results file lk-eval wrote"
            )
        if data.count(b"[") + data.count(b"{") > MAX_RESULTS_CONTAINERS:
            raise ResultsFileError(
                f"{path}: more than {MAX_RESULTS_CONTAINERS:,} JSON arrays and objects: "
                "not a results file lk-eval wrote"
            )
        with paused_collections():  # containers are all it makes: ~40% of a large parse
            raw = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ResultsFileError(_too_deep(path)) from None
    except FileNotFoundError:
        raise ResultsFileError(f"{path}: no such results file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultsFileError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ResultsFileError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    raw = bounded_history(raw)  # before anything walks it: the rest is never looked at
    with paused_collections():
        too_deep = _depth_over(raw, MAX_RESULTS_DEPTH)
    if too_deep:
        raise ResultsFileError(_too_deep(path))
    return results_from_dict(raw, source=str(path))


def bounded_history(raw: Any) -> Any:
    """``raw`` (a parsed results file) with its ``history`` cut to what a reader can use.

    Every reader of a history (:func:`~lkeval.results.history.rolled`, the file's own
    ``history_rate``) keeps at most :data:`~lkeval.results.history.MAX_WINDOW` runs, and looks
    a scenario up by the id and content digest of the file's own suite. So the last
    ``MAX_WINDOW`` runs are kept, scenarios whose id and digest are not the suite's are
    dropped, and so are counts of runs no longer kept (one per run, the last). What is dropped
    is never walked nor turned into model objects: a fork's artifact with 200,000 runs or
    28,000 unknown scenarios costs its JSON parse, which :data:`MAX_RESULTS_BYTES` bounds.
    A run or a count that is not one (a start time that is not a string, passes that are not
    a count) is dropped too: the readers hash and sum them.
    """
    if not isinstance(raw, dict) or not isinstance(history := raw.get("history"), dict):
        return raw
    runs = history.get("runs")
    scenarios = history.get("scenarios")
    if not isinstance(runs, list) or not isinstance(scenarios, dict):
        return raw
    runs = [r for r in runs[-MAX_WINDOW:] if _is_run(r)]
    kept = {r["started_at"] for r in runs}
    metadata = raw.get("metadata")
    suite = metadata.get("suite") if isinstance(metadata, dict) else None
    suite_digests = suite.get("scenarios") if isinstance(suite, dict) else None
    if not isinstance(suite_digests, dict):
        suite_digests = {}
    in_suite = {}
    for scenario_id, digest in suite_digests.items():
        entry = scenarios.get(scenario_id)
        if isinstance(entry, dict) and isinstance(digest, str) and entry.get("digest") == digest:
            in_suite[scenario_id] = {**entry, "counts": _counts_kept(entry.get("counts"), kept)}
    return {**raw, "history": {**history, "runs": runs, "scenarios": in_suite}}


def _counts_kept(counts: Any, kept: set[Any]) -> Any:
    """A scenario's counts of the runs kept, the last one of each run (at most
    :data:`~lkeval.results.history.MAX_WINDOW`), oldest first."""
    if not isinstance(counts, list):
        return []
    last: dict[Any, Any] = {}
    for count in reversed(counts):
        if len(last) == len(kept):
            break
        run = count.get("run") if isinstance(count, dict) else None
        if isinstance(run, str) and run in kept and run not in last and _is_count(count):
            last[run] = count
    return list(reversed(last.values()))


def _is_run(run: Any) -> bool:
    """A history's run: a start time, and a commit or none."""
    return (
        isinstance(run, dict)
        and isinstance(run.get("started_at"), str)
        and isinstance(run.get("git_sha"), (str, type(None)))
    )


def _is_count(count: dict[str, Any]) -> bool:
    """A scenario's count in one run: 0 <= passes <= attempts, whole numbers."""
    passes, attempts = count.get("passes"), count.get("attempts")
    if not isinstance(passes, int) or not isinstance(attempts, int):
        return False
    if isinstance(passes, bool) or isinstance(attempts, bool):
        return False
    return 0 <= passes <= attempts and isinstance(count.get("status", ""), str)


def _too_deep(path: str | Path) -> str:
    return (
        f"{path}: nested more than {MAX_RESULTS_DEPTH} levels deep: "
        "not a results file lk-eval wrote"
    )


_depth_over = depth_over  # one place for the bounds of untrusted JSON


def results_from_dict(raw: Any, source: str = "<results>") -> RunResults:
    """Build :class:`RunResults` from parsed JSON, checking the format version."""
    if not isinstance(raw, dict) or "scenarios" not in raw or "metadata" not in raw:
        raise ResultsFileError(f"{source}: not an lk-eval results file")
    version = raw.get("format_version")
    if version != FORMAT_VERSION:
        raise ResultsFileError(
            f"{source}: results format_version {version!r} is not supported "
            f"(this lk-eval reads version {FORMAT_VERSION})"
        )
    try:
        return _build(RunResults, raw)
    except (TypeError, ValueError, KeyError) as exc:
        raise ResultsFileError(f"{source}: malformed results file: {exc}") from None


T = TypeVar("T")


_HINTS: dict[Any, dict[str, Any]] = {}


def _hints(cls: Any) -> dict[str, Any]:
    """A dataclass's field types, resolved once (resolving them per object made a large
    file take seconds per megabyte)."""
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls)
    return _HINTS[cls]


def _build(cls: type[T], raw: Any, where: str = "") -> T:
    if not isinstance(raw, dict):
        raise ValueError(f"{where or 'the file'}: expected an object, got {_kind(raw)}")
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name in raw:
            kwargs[f.name] = _convert(hints[f.name], raw[f.name], _at(where, f.name))
    return cls(**kwargs)


#: What a JSON scalar must be for a field of each type (bool is not a number here).
_SCALARS: dict[Any, tuple[str, Callable[[Any], bool]]] = {
    str: ("a string", lambda v: isinstance(v, str)),
    bool: ("true or false", lambda v: isinstance(v, bool)),
    int: ("a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    float: (
        "a number",
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
    ),
}


def _convert(tp: Any, value: Any, where: str) -> Any:
    """``value`` as the field type ``tp``; a value of another type is a ValueError naming the
    field, so a malformed file is a clear error, never a wrong type deep in a report."""
    origin = get_origin(tp)
    args = get_args(tp)
    if value is None:
        return None
    if is_dataclass(tp) and isinstance(tp, type):
        return _build(tp, value, where)
    if origin is Literal:
        if value not in args:
            raise ValueError(f"{where}: {_kind(value)} is not one of {', '.join(map(repr, args))}")
        return value
    if origin is tuple:
        _expect(isinstance(value, list), where, "a list", value)
        return tuple(_convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        _expect(isinstance(value, dict), where, "an object", value)
        return {k: _convert(args[1], v, _at(where, k)) for k, v in value.items()}
    if origin is not None and type(None) in args:  # Optional[X]
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], value, where) if len(inner) == 1 else value
    if tp in _SCALARS:
        what, fits = _SCALARS[tp]
        _expect(fits(value), where, what, value)
        return float(value) if tp is float else value
    return value


def _expect(fits: bool, where: str, what: str, value: Any) -> None:
    if not fits:
        raise ValueError(f"{where}: expected {what}, got {_kind(value)}")


def _at(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _kind(value: Any) -> str:
    """A value as an error names it: its JSON kind, and a short scalar itself."""
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


__all__ = [
    "MAX_RESULTS_BYTES",
    "MAX_RESULTS_CONTAINERS",
    "MAX_RESULTS_DEPTH",
    "ResultsFileError",
    "bounded_history",
    "dump_results",
    "figures",
    "load_results",
    "results_document",
    "results_from_dict",
    "results_to_dict",
]
