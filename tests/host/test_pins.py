"""The speed patches' pins (lkeval/host/pins.py): a function's own source is the pin, so a
release that changes other lines of its file keeps a patch on, and one that changes the
function turns it off with a note naming it; every patch is on on the installed release."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from lkeval.agents import process
from lkeval.host import agent_host, control, idle_timers, pins, tls_context, tool_schemas

BUILDER = "def build(tool):\n    return {'name': tool}\n"
HELPER = "def helper():\n    return 1\n"


def _module(path: Path, text: str) -> ModuleType:
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"pinned_{abs(hash(text))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_other_lines_of_the_file_do_not_move_the_pin(tmp_path: Path) -> None:
    read = _module(tmp_path / "a.py", HELPER + "\n\n" + BUILDER)
    verified = {"1.0": {"build": str(pins.source_digest(read.build))}}
    # the next release rewrites the helper above it: the builder's lines move, its text stays
    moved = _module(
        tmp_path / "b.py", "import os\n\n\ndef helper():\n    return os.sep\n\n\n" + BUILDER
    )
    assert pins.check({"build": moved.build}, verified) == (True, "verified build")
    changed = _module(tmp_path / "c.py", BUILDER.replace("'name'", "'title'"))
    assert pins.check({"build": changed.build}, verified) == (False, "build changed since 1.0")


def test_a_function_without_source_is_never_verified() -> None:
    assert pins.source_digest(len) is None
    assert pins.check({"len": len}, {"1.0": {"len": "x"}}).on is False


@pytest.mark.smoke
def test_every_speed_patch_is_on_on_the_installed_livekit_agents() -> None:
    # CI runs this on each livekit-agents it installs (1.8.9 and, in .ci/run, 1.6.6): a release
    # that changed a wrapped function fails here, not silently off in every user's run
    notes = agent_host.speed_patches(tool_schemas.check())
    assert notes["tool_schemas"].startswith("on (verified"), notes
    assert notes["idle_timers"].startswith("on (verified"), notes
    has_monitor = importlib.util.find_spec("livekit.agents.telemetry.loop_monitor") is not None
    assert notes["loop_monitor_pause"].startswith("on (" if has_monitor else "off ("), notes
    assert idle_timers.check().on and tool_schemas.check().on


def test_the_patch_notes_name_what_turned_one_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(idle_timers, "VERIFIED", {"1.8.9": {}})
    monkeypatch.setattr(tls_context, "_prepared", [])
    notes = agent_host.speed_patches(None)
    assert notes["idle_timers"] == (
        "off (ProcPool._main_task, AgentServer.run._load_task changed since 1.8.9)"
    )
    assert notes["tls_context"].startswith("off (")
    monkeypatch.setattr(tls_context, "_prepared", ["httpx2"])
    assert agent_host.speed_patches(None)["tls_context"].startswith("on (prebuilt for httpx2")


def test_the_host_tells_lk_eval_which_patches_are_on() -> None:
    notes = {"tool_schemas": "on (verified x)", "idle_timers": "off (y changed since 1.8.9)"}
    line = agent_host.conditions_line("low", True, notes)
    said = process._conditions(line + control.PREPARED)
    assert said["speed_patches"] == notes and said["inference_class"] == "low"
    assert agent_host.conditions_line("low")  # a host that has none says an empty table
    assert process._conditions(agent_host.conditions_line("low"))["speed_patches"] == {}
