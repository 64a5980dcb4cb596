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
from dataclasses import asdict, fields, is_dataclass
from pathlib import Path
from typing import Any, TypeVar, get_args, get_origin, get_type_hints

from lkeval.errors import InputFileError
from lkeval.results.history import HistoryRate, digests, rate_of, scenario_entry
from lkeval.results.metrics import Metrics, Spread, scenario_metrics, suite_metrics
from lkeval.results.model import FORMAT_VERSION, RunResults
from lkeval.text.bounded_json import MAX_DEPTH, depth_over


def figures(metrics: Metrics) -> dict[str, Any]:
    """The JSON form of what a report shows for ``metrics`` (None where nothing was measured)."""
    return {
        "turns": metrics.turns,
        "latency_ms": _spread(metrics.latency),
        "ttft_ms": _spread(metrics.ttft),
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
        raw = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ResultsFileError(_too_deep(path)) from None
    except FileNotFoundError:
        raise ResultsFileError(f"{path}: no such results file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultsFileError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ResultsFileError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    if _depth_over(raw, MAX_RESULTS_DEPTH):
        raise ResultsFileError(_too_deep(path))
    return results_from_dict(raw, source=str(path))


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


def _build(cls: type[T], raw: Any) -> T:
    hints = get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name in raw:
            kwargs[f.name] = _convert(hints[f.name], raw[f.name])
    return cls(**kwargs)


def _convert(tp: Any, value: Any) -> Any:
    origin = get_origin(tp)
    args = get_args(tp)
    if value is None:
        return None
    if is_dataclass(tp) and isinstance(tp, type):
        return _build(tp, value)
    if origin is tuple:
        return tuple(_convert(args[0], v) for v in value)
    if origin is dict:
        return {k: _convert(args[1], v) for k, v in value.items()}
    if origin is not None and type(None) in args:  # Optional[X]
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], value) if len(inner) == 1 else value
    return value


__all__ = [
    "MAX_RESULTS_BYTES",
    "MAX_RESULTS_DEPTH",
    "ResultsFileError",
    "dump_results",
    "figures",
    "load_results",
    "results_document",
    "results_from_dict",
    "results_to_dict",
]
