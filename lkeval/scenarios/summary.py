"""What ``lkeval validate`` prints about loaded scenario files: a short paragraph per file."""

from __future__ import annotations

from collections.abc import Sequence

from lkeval.scenarios.model import ScenarioGroup
from lkeval.scenarios.yaml_nodes import Diagnostic


def summarize(groups: Sequence[ScenarioGroup], diagnostics: Sequence[Diagnostic] = ()) -> str:
    """What ``lkeval validate`` prints: one short paragraph per file, then ``OK``."""
    lines: list[str] = []
    for group in groups:
        scripted = [s for s in group.scenarios if s.turns]
        turns = sum(len(s.turns) for s in scripted)
        checks = sum(len(t.expect) for s in scripted for t in s.turns)
        derived = sum(1 for s in group.scenarios if s.id_derived)
        title = f"{group.name} ({group.id})" if group.id else group.name
        lines.append(f"{group.file}: {title}")
        lines.append(
            f"  {_plural(len(group.scenarios), 'scenario')}: {len(scripted)} scripted "
            f"({_plural(turns, 'turn')}, {_plural(checks, 'expectation')}), "
            f"{len(group.scenarios) - len(scripted)} simulated user only"
        )
        if derived:
            lines.append(f"  {derived} without 'id:' (ids derived from group name and label)")
        mocked = sorted({m.name for s in group.scenarios for m in s.mock_tools})
        if mocked:
            users = sum(1 for s in group.scenarios if s.mock_tools)
            lines.append(
                f"  {_plural(users, 'scenario')} with mock_tools ({', '.join(mocked)}): "
                "checked against the agent's tools when it runs"
            )
        # Certain whatever judge model is named; only --judges could still give them a check.
        idle = [
            s.label
            for s in group.scenarios
            if s.nothing_to_check(judge_scripted=True, run_judges=()) is not None
        ]
        if idle:
            lines.append(
                f"  {len(idle)} with nothing to check, not played: {', '.join(idle[:5])}"
                + (f" and {len(idle) - 5} more" if len(idle) > 5 else "")
            )
    total = sum(len(g.scenarios) for g in groups)
    warnings = sum(1 for d in diagnostics if not d.is_error)
    errors = len(diagnostics) - warnings
    verdict = "FAILED" if errors else "OK"
    tail = f", {_plural(errors, 'error')}" if errors else ""
    tail += f", {_plural(warnings, 'warning')}" if warnings else ""
    lines.append(f"{verdict}: {_plural(len(groups), 'file')}, {_plural(total, 'scenario')}{tail}")
    return "\n".join(lines)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
