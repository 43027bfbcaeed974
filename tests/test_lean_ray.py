"""A local Ray instance runs only what a run talks to (evolve/lean_ray.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import ray
from ray._private.node import Node

from evolve import lean_ray
from evolve.lean_ray import left_out
from tests.conftest import descendants


def descendants_commands(root: int) -> list[str]:
    """The command lines of every process under `root`."""
    commands = []
    for pid in descendants(root):
        try:
            commands.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return commands


@pytest.mark.usefixtures("ray_session")
def test_a_local_instance_leaves_out_the_monitors_and_the_dashboard_and_still_runs_tasks() -> None:
    @ray.remote(num_cpus=0)
    def answer() -> int:
        return 42

    assert ray.get(answer.remote(), timeout=60) == 42
    commands = descendants_commands(os.getpid())
    assert any("gcs_server" in c for c in commands) and any("raylet" in c for c in commands)
    for script in ("autoscaler/_private/monitor.py", "log_monitor.py", "dashboard/dashboard.py"):
        assert not any(script in c for c in commands), (script, commands)
    # Ray's own methods are back once the start is over.
    assert all(getattr(Node, name).__name__ == name for name in left_out())


def test_the_api_server_is_left_out_only_where_no_dashboard_module_would_wait_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # This environment has Ray without the dashboard's dependencies, as evolve installs it.
    assert "start_api_server" in left_out()
    # With ray[default], the agent's modules wait for the API server: it must start.
    monkeypatch.setattr(lean_ray, "get_dashboard_dependency_error", lambda: None)
    assert left_out() == ("start_monitor", "start_log_monitor")
