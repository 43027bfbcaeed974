"""Shared fixtures: one real Ray instance per session, and small real task folders. The fast
lane and the system tests are sorted by tests/lanes.py, registered here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import ray
import sqlalchemy
from sqlalchemy.engine import make_url

from evolve.evaluators.c_kernel import CKernelEvaluator
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult
from evolve.plugin.sandbox import Sandbox
from evolve.runtime import cluster
from evolve.sandboxes import DockerSandbox, ProcessSandbox, docker_available
from evolve.sandboxes.isolation import detect
from evolve.store import CandidateRecord, Store
from tests import lanes

ROOT = Path(__file__).resolve().parents[1]

SYNTHETIC_SEED = """\
# A program for the synthetic evaluator: its score is how close the knob sum is to target.
# EVOLVE-BLOCK-START
A = 1  # @knob int 0..64
B = 1  # @knob int 0..64
C = 1.0  # @knob float 0.1..20
# EVOLVE-BLOCK-END
"""


EVOLVE = [sys.executable, "-m", "evolve"]

POSTGRES_URL = os.environ.get("EVOLVE_TEST_POSTGRES_URL")


def store_record(store: Store, candidate_id: int) -> CandidateRecord:
    """The candidate as the store holds it now: what `Store.record_evaluation` takes."""
    record = store.candidate(candidate_id)
    assert record is not None, f"no candidate #{candidate_id}"
    return record


@contextmanager
def postgres_schema() -> Iterator[str]:
    """A URL of the test server with a schema of its own, dropped afterwards; a plain
    `postgresql://` URL, so every use also checks that the store maps it to psycopg. Skips
    where no server is named."""
    lanes.reaching("PostgreSQL")
    if not POSTGRES_URL:
        pytest.skip("EVOLVE_TEST_POSTGRES_URL is not set; run .ci/postgres.sh and export its URL")
    schema = f"test_{uuid.uuid4().hex[:12]}"
    admin = sqlalchemy.create_engine(make_url(POSTGRES_URL).set(drivername="postgresql+psycopg"))
    with admin.begin() as connection:
        connection.execute(sqlalchemy.text(f'CREATE SCHEMA "{schema}"'))
    plain = make_url(POSTGRES_URL).set(drivername="postgresql")
    try:
        yield plain.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
            hide_password=False
        )
    finally:
        with admin.begin() as connection:
            connection.execute(sqlalchemy.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A schema of its own on the test server (`postgres_schema`), for PostgreSQL-only tests."""
    with postgres_schema() as url:
        yield url


# The kernel contract of the shipped matmul_c task, as flow-style YAML params, for tests that
# write matmul tasks of their own beside its reference.py.
MATMUL_CONTRACT = (
    "entry: matmul, signature: 'void matmul(int n, const float *restrict A, "
    "const float *restrict B, float *restrict C)', "
    "inputs: [{name: A, dtype: float32}, {name: B, dtype: float32}], "
    "outputs: [{name: C, dtype: float32}]"
)


# Set before Ray starts, so every worker process holds it. Its name is not a secret's
# (evolve/plugin/secrets.py withholds those from Ray), so it tests the sandbox's own wall: no host
# variable at all reaches a candidate.
CANARY_SECRET = "hunter2-evolve-canary-7f3a"


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(lanes.LanesPlugin(), "evolve-lanes")


def pytest_sessionstart(session: pytest.Session) -> None:
    """CI sets EVOLVE_REQUIRE_DOCKER=1 so that the Docker tests run there, never skip."""
    if os.environ.get("EVOLVE_REQUIRE_DOCKER") == "1":
        ok, why = docker_available()
        if not ok:
            raise pytest.UsageError(f"EVOLVE_REQUIRE_DOCKER=1, but {why}")


def open_backend(backend: str) -> Sandbox:
    """A real sandbox of `backend` for a test parametrized over backends. It skips where the
    backend cannot run here, except in CI (EVOLVE_REQUIRE_DOCKER=1), where every one must."""
    required = os.environ.get("EVOLVE_REQUIRE_DOCKER") == "1"
    if backend == "docker":
        ok, why = docker_available()
        if not ok:
            pytest.skip(f"no Docker sandbox here: {why}")
        return DockerSandbox()
    isolation = detect()
    if isolation.tool is None:
        if required:
            pytest.fail(f"the process sandbox cannot isolate here: {isolation.detail}")
        pytest.skip(isolation.detail)
    return ProcessSandbox()


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    os.environ["EVOLVE_CANARY_VALUE"] = CANARY_SECRET
    started = cluster.connect(None)
    yield
    if started:
        ray.shutdown()


def c_kernel_task(
    folder: Path, reference: str, params: dict[str, Any], **files: str
) -> CKernelEvaluator:
    """A c_kernel evaluator for a task of a test's own in `folder`: its reference.py and
    `files` (harness.c, say) written there, counters off unless `params` say otherwise."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "reference.py").write_text(textwrap.dedent(reference))
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text))
    return CKernelEvaluator({"reference": "reference.py", "counters": "never", **params}, folder)


def draft_kernel(evaluator: CKernelEvaluator, sandbox: Sandbox, body: str) -> EvalResult:
    """Build and check `body` (an EVOLVE-BLOCK's text) once, as the agent's drafts are: no
    seed, no timing."""
    program = Program({"kernel.c": f"// EVOLVE-BLOCK-START\n{body}\n// EVOLVE-BLOCK-END\n"})
    return evaluator.draft(program, sandbox, seed=1)


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


def write_matmul_task(
    folder: Path, model: dict[str, str], *, mutator: str, candidates: int = 2, n: int = 64
) -> Path:
    """The shipped matmul task made small (no counters, the process sandbox), evolved by one
    model operator."""
    task_dir = folder / "matmul"
    shutil.copytree(ROOT / "tasks" / "matmul_c", task_dir)
    text = (task_dir / "task.yaml").read_text()
    text = re.sub(r"(?m)^    counter_sizes: .*\n", "", text)
    text = text.replace("sizes: {n: 512}", f"sizes: {{n: {n}}}\n    counters: false")
    text = text.replace("reps: 7", "reps: 5")
    text = text.replace("  - {name: autotuner}", f"  - {{name: {mutator}}}")
    text = text.replace("  candidates: 200", f"  candidates: {candidates}")
    text = text.replace("  backend: docker", "  backend: process")
    text += f"llm:\n  models:\n    - {json.dumps(model)}\n  timeout_s: 5\n  finisher_share: 0\n"
    (task_dir / "task.yaml").write_text(text)
    return task_dir / "task.yaml"


def wait_for_driver(
    condition: Callable[[], bool], what: str, driver: subprocess.Popen[bytes], log: Path
) -> None:
    """Until `condition` holds, failing with the driver's output if the driver exits first
    or two minutes pass."""
    deadline = time.monotonic() + 120
    while not condition():
        assert driver.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"{what}:\n{log.read_text()}"
        time.sleep(0.2)


def descendants(root: int) -> set[int]:
    """Every process under `root`, read from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rpartition(") ")[2].split()[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def unique_sleep() -> str:
    """A sleep whose command line is unique to this test: 1000.<random digits> seconds."""
    return f"1000.{uuid.uuid4().int % 10**9}"
