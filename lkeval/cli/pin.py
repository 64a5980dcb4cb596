"""``lkeval pin``: turn one attempt's conversation into a scripted scenario in the repository.

A simulated conversation that failed is the best regression test a team will ever get, but it
is not repeatable: the simulated caller samples another conversation next time. Pinning keeps
it: the caller's lines become scripted turns (the same words every run), and the scenario keeps
what judged it (``agent_expectations``, ``userdata`` for the agent's own ``on_simulation_end``
veto, the judges, the tags). What the agent did is drawn into checks:

- from a **passed** attempt, each turn's tool calls (name and arguments), handoffs and the
  gist of the agent's reply become that turn's ``expect:`` (the agent must keep doing this);
- from a **failed** attempt the same observations are written as comments above each turn,
  not as checks: they describe the broken behaviour, and a check of them would pass on the
  broken agent and fail on the fixed one. The pinned scenario then fails the way the attempt
  did (the same judged expectations and veto on the same words) and passes once the agent is
  fixed; the comments are there to write the right checks from.

The scenario is appended to ``--into`` (or a new file), validated before anything is written,
and the file is replaced in one step.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from lkeval.errors import ExitCode, InputFileError, UsageError
from lkeval.results.model import Attempt, ScenarioResult, TranscriptItem
from lkeval.results.results_json import load_results
from lkeval.scenarios.loader import load_scenario_file
from lkeval.scenarios.model import Scenario
from lkeval.text.untrusted import inert_line

#: How much of an agent reply becomes an ``intent:`` (a judge reads it, a person edits it).
GIST_CHARS = 160
NEW_FILE = "name: Pinned conversations\nscenarios:\n"


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``pin``."""
    parser = sub.add_parser(
        "pin",
        help="turn one attempt's conversation into a scripted scenario",
        description="Write an attempt of a results file as a new scripted scenario: the "
        "caller's lines as turns, the scenario's expectations, userdata and judges kept, and "
        "what the agent did as checks (a passed attempt) or as comments (a failed one).",
    )
    parser.add_argument("--results", required=True, metavar="PATH", help="a results.json")
    parser.add_argument("--scenario", required=True, metavar="ID", help="the scenario's id")
    parser.add_argument(
        "--attempt",
        type=int,
        metavar="N",
        help="which attempt, from 1 (default: the first that failed, else the first)",
    )
    parser.add_argument(
        "--into", required=True, metavar="SCENARIOS.yaml", help="the file to append it to"
    )
    parser.add_argument("--id", metavar="ID", help="the new scenario's id (default: ID-pinN)")
    parser.set_defaults(handler=_pin_handler)


def _pin_handler(args: argparse.Namespace) -> int:
    results = load_results(args.results)
    result = _find_scenario(results.scenarios, args.scenario)
    number, attempt = _choose_attempt(result, args.attempt)
    into = Path(args.into)
    original = _original(result, into)
    new_id = args.id or f"{result.scenario_id}-pin{number}"
    source = f"{args.results}, scenario {result.scenario_id}, attempt {number}"
    item = pinned_scenario(result, attempt, original, new_id, source)
    line = append_scenario(into, item)
    print(inert_line(f"pinned {source} as {new_id} into {into}:{line}"))
    print(
        inert_line(
            f"run it: lkeval run --agent AGENT.py --scenarios {into} --match '{new_id}' "
            "--judge-model MODEL"
        )
    )
    return int(ExitCode.PASSED)


def _find_scenario(scenarios: tuple[ScenarioResult, ...], wanted: str) -> ScenarioResult:
    for result in scenarios:
        if result.scenario_id == wanted:
            return result
    ids = [s.scenario_id for s in scenarios]
    close = difflib.get_close_matches(wanted, ids, n=1)
    tip = f" (did you mean '{close[0]}'?)" if close else f"; it has: {', '.join(ids[:10])}"
    raise UsageError(f"--scenario {wanted}: no such scenario in the results{tip}")


def _choose_attempt(result: ScenarioResult, wanted: int | None) -> tuple[int, Attempt]:
    attempts = result.attempts
    if not attempts:
        raise UsageError(f"--scenario {result.scenario_id}: it has no attempt ({result.reason})")
    if wanted is None:
        wanted = next((n for n, a in enumerate(attempts, 1) if a.status == "failed"), 1)
    if not 1 <= wanted <= len(attempts):
        raise UsageError(f"--attempt {wanted}: {result.scenario_id} has {len(attempts)}")
    attempt = attempts[wanted - 1]
    if not any(item.role == "user" for item in attempt.transcript):
        raise UsageError(
            f"--attempt {wanted}: no caller line to pin ({attempt.status}: {attempt.reason})"
        )
    return wanted, attempt


def _original(result: ScenarioResult, into: Path) -> Scenario | None:
    """The scenario as its file says (expectations, userdata, judges), where it can be read."""
    for path in (Path(result.file), into):
        if not path.is_file():
            continue
        group, _ = load_scenario_file(path)
        for scenario in group.scenarios:
            if scenario.id == result.scenario_id:
                return scenario
    print(
        inert_line(
            f"note: {result.scenario_id} is in neither {result.file} nor {into}: its "
            "agent_expectations and userdata are not carried over"
        ),
        file=sys.stderr,
    )
    return None


def pinned_scenario(
    result: ScenarioResult,
    attempt: Attempt,
    original: Scenario | None,
    new_id: str,
    source: str,
) -> str:
    """The new scenario as a YAML list item (at indent 0, ``- id: ...``), comments included."""
    passed = attempt.status == "passed"
    out = [
        f"# pinned by `lkeval pin` from {_oneline(source)}: {attempt.status}"
        + (f" ({_oneline(attempt.reason)[:200]})" if attempt.reason else ""),
        f"- id: {_flow(new_id)}",
        f"  label: {_flow(result.label + ' (pinned)')}",
    ]
    if original is not None:
        if original.instructions:
            out.append(f"  instructions: {_flow(original.instructions)}")
        if original.agent_expectations:
            out.append(f"  agent_expectations: {_flow(original.agent_expectations)}")
        if original.userdata is not None:
            out.append(f"  userdata: {_flow(original.userdata)}")
        if original.judges:
            out.append(f"  judges: {_flow(list(original.judges))}")
    out.append(f"  tags: {_flow({**result.tags, 'pinned': 'true'})}")
    out.append("  turns:")
    for turn in sorted({i.turn for i in attempt.transcript if i.turn > 0}):
        items = [i for i in attempt.transcript if i.turn == turn]
        line = " ".join(i.text.strip() for i in items if i.role == "user" and i.text.strip())
        if not line:
            continue
        checks = [check for check in map(_check_of, items) if check is not None]
        if not passed:
            out.extend(f"    # the attempt: {_oneline(json.dumps(c))[:300]}" for c in checks)
        out.append(f"    - user: {_flow(line)}")
        if passed and checks:
            out.append("      expect:")
            out.extend(f"        - contains: {_flow(check)}" for check in checks)
    return "\n".join(out) + "\n"


def _check_of(item: TranscriptItem) -> dict[str, Any] | None:
    """What the agent did in one transcript item, as an expectation (or None)."""
    if item.kind == "function_call" and item.name:
        call: dict[str, Any] = {"name": item.name}
        arguments = _arguments(item.arguments)
        if arguments:
            call["arguments"] = arguments
        return {"function_call": call}
    if item.kind == "agent_handoff" and item.new_agent:
        return {"handoff": {"to": item.new_agent}}
    if item.kind == "message" and item.role == "assistant" and item.text.strip():
        gist = " ".join(item.text.split())[:GIST_CHARS]
        return {"message": {"intent": f"says, in substance: {gist}"}}
    return None


def _arguments(raw: str | None) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _flow(value: Any) -> str:
    """One YAML flow value: JSON, which YAML reads as written (strings quoted, maps inline)."""
    return json.dumps(value, ensure_ascii=False)


def _oneline(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def append_scenario(into: Path, item: str) -> int:
    """Append ``item`` to the ``scenarios:`` list of ``into`` (a new file when it does not
    exist), check the result loads without errors, and replace the file in one step; the
    line the new scenario starts on."""
    text = into.read_text(encoding="utf-8") if into.exists() else NEW_FILE
    indent = _list_indent(text, into)
    body = "".join(
        (" " * indent + line if line else line) + "\n" for line in item.rstrip("\n").split("\n")
    )
    combined = text if text.endswith("\n") else text + "\n"
    start = combined.count("\n") + 2
    combined += "\n" + body
    _check_loads(combined, into)
    folder = into.parent  # "." for a bare file name
    fd, temp = tempfile.mkstemp(prefix=f".{into.name}.", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(combined)
        os.replace(temp, into)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return start


def _list_indent(text: str, into: Path) -> int:
    """The column of the ``scenarios:`` list's items, when the list is the file's last block
    (so appending lines extends it); else an error (the file must be extended by hand)."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        raise InputFileError(
            f"{into}: not valid YAML; run `lkeval validate {into}`: {exc}"
        ) from None
    if not isinstance(root, yaml.MappingNode):
        raise InputFileError(f"{into}: not a scenario file (a mapping with 'scenarios:')")
    entries = {key.value: value for key, value in root.value}
    scenarios = entries.get("scenarios")
    last_value = root.value[-1][1]
    empty = isinstance(scenarios, yaml.ScalarNode) and scenarios.value in ("", "~", "null")
    if empty and last_value is scenarios:  # `scenarios:` with nothing under it yet
        return 2
    if not isinstance(scenarios, yaml.SequenceNode) or last_value is not scenarios:
        raise InputFileError(
            f"{into}: its 'scenarios:' list must be the file's last key to append to it; "
            "pin into a new file instead"
        )
    if scenarios.flow_style:
        raise InputFileError(f"{into}: 'scenarios:' is a flow list ([...]); pin into a new file")
    if not scenarios.value:
        return 2
    return int(scenarios.value[0].start_mark.column) - 2


def _check_loads(text: str, into: Path) -> None:
    folder = into.parent  # "." for a bare file name
    fd, temp = tempfile.mkstemp(prefix=f".{into.name}.check.", suffix=".yaml", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        _, diagnostics = load_scenario_file(temp)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)
    errors = [str(d).replace(temp, str(into)) for d in diagnostics if d.is_error]
    if errors:
        raise InputFileError(f"{into}: the pinned scenario would not load: {errors[0]}")
