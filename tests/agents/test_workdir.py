"""An agent's own working directory: a link to each entry of the project, its temp dir."""

from __future__ import annotations

import os
from pathlib import Path

from lkeval.agents.workdir import prepare_agent_dir
from lkeval.host import tree


def test_each_link_points_at_the_entrys_real_path_through_linked_directories(
    tmp_path: Path,
) -> None:
    real = tmp_path / "real-project"
    (real / "pkg").mkdir(parents=True)
    (real / "agent.py").write_text("x = 1\n")
    outside = tmp_path / "elsewhere" / "data.json"
    outside.parent.mkdir()
    outside.write_text("{}")
    (real / "data.json").symlink_to(outside)  # an entry that is a link itself
    (real / "chain").symlink_to(real / "data.json")  # a link to a link
    (real / tree.AGENT_TMP).mkdir()  # never linked: the agent's temp dir is its own
    project = tmp_path / "project"  # the project reached through a link
    project.symlink_to(real)
    agent_dir = tmp_path / "agent.files"
    agent_dir.mkdir()
    (agent_dir / "agent.py").write_text("mine\n")  # already there: left alone

    prepare_agent_dir(agent_dir, project)

    assert (agent_dir / tree.AGENT_TMP).is_dir()
    assert not (agent_dir / tree.AGENT_TMP).is_symlink()
    assert (agent_dir / "agent.py").read_text() == "mine\n"
    for name in ("pkg", "data.json", "chain"):
        link = agent_dir / name
        assert link.is_symlink()
        assert Path(os.readlink(link)) == (project / name).resolve()
    assert Path(os.readlink(agent_dir / "chain")) == outside.resolve()
    assert sorted(p.name for p in agent_dir.iterdir()) == sorted(
        ["pkg", "agent.py", "data.json", "chain", tree.AGENT_TMP]
    )
