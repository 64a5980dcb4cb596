"""A results file's scalars are checked against the model's field types while it is read.

A fork's artifact (the comment job reads it) or a hand-edited file with a string where a number
belongs once loaded as a model of the wrong types, and failed later, deep in a report or the
gate, as an internal error (exit 4). Now it is a ResultsFileError naming the field (exit 2).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from report_fixtures import run_results

from lkeval.results.results_json import ResultsFileError, dump_results, results_from_dict


def _raw() -> dict[str, Any]:
    return json.loads(dump_results(run_results()))


@pytest.mark.parametrize(
    ("place", "value", "said"),
    [
        (("metadata", "duration_seconds"), "slow", "metadata.duration_seconds: expected a number"),
        (("metadata", "duration_seconds"), True, "metadata.duration_seconds: expected a number"),
        (("metadata", "interrupted"), "yes", "metadata.interrupted: expected true or false"),
        (("metadata", "git_sha"), 12, "metadata.git_sha: expected a string, got 12"),
        (("metadata", "scenario_files"), "s.yaml", "metadata.scenario_files: expected a list"),
        (("scenarios", 0, "status"), "green", 'scenarios[0].status: "green" is not one of'),
        (("scenarios", 0, "attempts"), {"a": 1}, "scenarios[0].attempts: expected a list"),
        (("scenarios", 0), [], "scenarios[0]: expected an object, got a list"),
    ],
)
def test_a_value_of_the_wrong_type_is_a_clear_error_naming_the_field(
    place: tuple[Any, ...], value: Any, said: str
) -> None:
    raw = _raw()
    parent: Any = raw
    for key in place[:-1]:
        parent = parent[key]
    assert place[-1] in parent or isinstance(place[-1], int)  # the field exists today
    parent[place[-1]] = value
    with pytest.raises(ResultsFileError, match="malformed results file") as caught:
        results_from_dict(raw, source="r.json")
    assert said in str(caught.value)


def test_a_non_finite_number_is_refused() -> None:
    raw = _raw()
    raw["metadata"]["duration_seconds"] = float("nan")
    with pytest.raises(ResultsFileError, match="duration_seconds: expected a number, got NaN"):
        results_from_dict(raw)


def test_what_lkeval_writes_reads_back_equal() -> None:
    results = run_results()
    assert results_from_dict(json.loads(dump_results(results))) == results
