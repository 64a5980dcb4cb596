"""``lkeval dev --watch``'s two parts: what counts as an edit, and what is imported again."""

from __future__ import annotations

import sys
import threading
import time
import types
from pathlib import Path

import pytest

from lkeval.inproc import loader, watch


def _project(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "lookup.py").write_text("X = 1\n")
    (tmp_path / ".venv" / "lib").mkdir(parents=True)
    (tmp_path / ".venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / ".venv" / "lib" / "dep.py").write_text("Y = 1\n")
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / "env" / "other.py").write_text("Z = 1\n")
    agent = tmp_path / "agent.py"
    agent.write_text("import tools.lookup\n")
    scenarios = tmp_path / "scenarios.yaml"
    scenarios.write_text("scenarios: []\n")
    return agent, scenarios


def test_the_agents_sources_and_scenarios_are_watched_not_its_virtual_env(tmp_path: Path) -> None:
    agent, scenarios = _project(tmp_path)
    watched = set(watch.snapshot(agent, [scenarios]))
    assert watched == {str(agent), str(tmp_path / "tools" / "lookup.py"), str(scenarios)}


def test_a_save_is_seen_once_the_files_settle(tmp_path: Path) -> None:
    agent, scenarios = _project(tmp_path)
    before = watch.snapshot(agent, [scenarios])

    def save() -> None:
        time.sleep(0.3)
        (tmp_path / "tools" / "lookup.py").write_text("X = 2\n")

    threading.Thread(target=save).start()
    after = watch.wait_for_change(agent, [scenarios], before)
    assert after != before
    assert after == watch.snapshot(agent, [scenarios])


def test_forget_drops_the_agents_modules_and_keeps_installed_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, _ = _project(tmp_path)
    modules = {
        "lkeval_w_agent": agent,
        "lkeval_w_tools": tmp_path / "tools" / "lookup.py",
        "lkeval_w_dep": tmp_path / ".venv" / "lib" / "site-packages" / "dep.py",
        "lkeval_w_elsewhere": tmp_path.parent / "elsewhere.py",
    }
    for name, path in modules.items():
        module = types.ModuleType(name)
        module.__file__ = str(path)
        monkeypatch.setitem(sys.modules, name, module)
    assert loader.forget(agent) == 2
    kept = {name for name in modules if name in sys.modules}
    assert kept == {"lkeval_w_dep", "lkeval_w_elsewhere"}
