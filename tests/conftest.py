"""Shared fixtures: one real Ray instance per session, and small real task folders."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from evolve import cluster

SYNTHETIC_SEED = """\
# A program for the synthetic evaluator: its score is how close the knob sum is to target.
# EVOLVE-BLOCK-START
A = 1  # @knob int 0..64
B = 1  # @knob int 0..64
C = 1.0  # @knob float 0.1..20
# EVOLVE-BLOCK-END
"""


# Set before Ray starts, so every worker process holds it, as a user's API key would be.
CANARY_SECRET = "hunter2-evolve-canary-7f3a"


def pytest_sessionstart(session: pytest.Session) -> None:
    """CI sets EVOLVE_REQUIRE_DOCKER=1 so that the Docker tests run there, never skip."""
    if os.environ.get("EVOLVE_REQUIRE_DOCKER") == "1":
        from sandboxes import docker_available

        ok, why = docker_available()
        if not ok:
            raise pytest.UsageError(f"EVOLVE_REQUIRE_DOCKER=1, but {why}")


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    os.environ["EVOLVE_CANARY_SECRET"] = CANARY_SECRET
    started = cluster.connect(None)
    yield
    if started:
        ray.shutdown()


def write_synthetic_task(
    folder: Path,
    *,
    candidates: int = 30,
    params: str = "{target: 100}",
    islands: int = 2,
    migration_interval: int = 5,
) -> Path:
    """A task on the synthetic evaluator, which runs nothing and scores knob sums."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "seed.py").write_text(SYNTHETIC_SEED)
    task = folder / "task.yaml"
    task.write_text(
        textwrap.dedent(
            f"""\
            name: synthetic
            seed: seed.py
            evaluator:
              name: synthetic
              params: {params}
            objectives:
              - name: distance
                direction: minimize
            search:
              islands: {islands}
              migration_interval: {migration_interval}
            budget:
              candidates: {candidates}
            sandbox:
              backend: process
            """
        )
    )
    return task
