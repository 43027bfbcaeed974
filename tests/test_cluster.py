"""`evolve run --ray-address` on a real multi-node cluster (tests/ray_nodes.py: worker nodes
in containers, one CPU each, the head on this host) with a PostgreSQL store: a worker node
killed mid-run costs the run neither a candidate nor more than the pool's start deadline of
stall, and a second driver is refused the run there as it is on one machine.

The cluster starts once for the module; each run has a PostgreSQL schema of its own."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from evolve.engine.pool import START_DEADLINE_S
from evolve.sandboxes.docker import docker_available
from evolve.store import EvaluationRecord, Store
from tests.conftest import EVOLVE, wait_for_driver, write_synthetic_task
from tests.helpers.stores import raw_engine
from tests.ray_nodes import RayNodes

pytestmark = [pytest.mark.docker, pytest.mark.postgres]

POSTGRES_URL = os.environ.get("EVOLVE_TEST_POSTGRES_URL")
BUDGET = 160  # at 0.3 s each: a fresh node (10-30 s to join when loaded) joins before the end
WENT_ON = 3  # evaluations finished after the lost job's retry, before a fresh node is added
RUN_TIMEOUT_S = 120.0  # for the rest of the run once the fresh node has joined (~20 s)
STOP_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def nodes() -> Iterator[RayNodes]:
    if not POSTGRES_URL:
        pytest.skip("EVOLVE_TEST_POSTGRES_URL is not set; run .ci/postgres.sh and export its URL")
    ok, why = docker_available()
    if not ok:
        if os.environ.get("EVOLVE_REQUIRE_DOCKER") == "1":
            pytest.fail(f"EVOLVE_REQUIRE_DOCKER=1, but {why}")
        pytest.skip(f"no container cluster here: {why}")
    with RayNodes.running(workers=2) as cluster:
        yield cluster


@pytest.fixture
def db() -> Iterator[str]:
    """A schema of its own in the test server: other runs there (other tests, other people's)
    are neither seen nor swept by these drivers."""
    assert POSTGRES_URL
    schema = f"cluster_{uuid.uuid4().hex[:12]}"
    admin = raw_engine(POSTGRES_URL)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(POSTGRES_URL).update_query_dict({"options": f"-csearch_path={schema}"})
    yield url.render_as_string(hide_password=False)
    with admin.begin() as connection:
        connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


def _driver(
    nodes: RayNodes, folder: Path, db: str, *args: str
) -> tuple[subprocess.Popen[bytes], Path]:
    log = folder / f"driver-{time.monotonic_ns()}.log"
    driver = subprocess.Popen(
        [*EVOLVE, "run", *args, "--ray-address", nodes.address, "--db", db, "--plain"],
        cwd=folder, env=nodes.driver_env(), stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    return driver, log


def _stop(driver: subprocess.Popen[bytes]) -> None:
    """Ctrl-C first, so that the driver kills its workers on the cluster before it goes."""
    if driver.poll() is None:
        driver.send_signal(signal.SIGINT)
        try:
            driver.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            driver.kill()
            driver.wait()


def _evaluations(db: str, run: str) -> list[EvaluationRecord]:
    with Store(db) as store:
        return store.run_evaluations(run)


def test_a_second_driver_of_a_run_on_the_cluster_is_refused_and_told_who_holds_it(
    nodes: RayNodes, db: str, tmp_path: Path
) -> None:
    run = f"shared-{uuid.uuid4().hex[:6]}"
    task = write_synthetic_task(tmp_path / "task", candidates=100000, params="{delay_s: 0.5}")
    first, log = _driver(nodes, tmp_path, db, str(task), "--name", run, "--workers", "2")
    try:
        wait_for_driver(lambda: len(_evaluations(db, run)) > 1, "never evaluated", first, log)
        second = subprocess.run(
            [*EVOLVE, "run", "--resume", run, "--ray-address", nodes.address, "--db", db,
             "--plain"],
            cwd=tmp_path, env=nodes.driver_env(), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        said = " ".join(second.stderr.split())
        assert second.returncode == 2, second.stdout + second.stderr
        assert f"run {run} is being driven by pid {first.pid} of " in said, said
        first.send_signal(signal.SIGINT)
        assert first.wait(timeout=STOP_TIMEOUT_S) == 130, log.read_text()
    finally:
        _stop(first)
    with Store(db) as store:
        record = store.get_run(run)
    assert record is not None and record.status == "stopped"


def test_a_run_that_loses_a_node_goes_on_without_it_and_grows_back_when_one_joins(
    nodes: RayNodes, db: str, tmp_path: Path
) -> None:
    """A node is killed while both evaluate. The run must notice (the job in flight there is
    retried), go on with the node left, whose CPU is the only one, and, once a fresh node
    joins, put the lost worker's replacement there. The stall is measured from outside, in
    the store: the longest gap between finished evaluations."""
    first_nodes = nodes.live[-2:]
    run = f"nodeloss-{uuid.uuid4().hex[:6]}"
    task = write_synthetic_task(
        tmp_path / "task", candidates=BUDGET, params="{target: 100, delay_s: 0.3}"
    )
    driver, log = _driver(nodes, tmp_path, db, str(task), "--name", run, "--workers", "2")

    def on_both() -> bool:
        per_host = _per_host(_evaluations(db, run))
        return all(len(per_host[name]) >= 2 for name in first_nodes)

    def went_on() -> bool:
        """The lost job was retried and the node left finished more after it: the loop
        neither waited for the lost worker's replacement nor for a node to place it on."""
        # The job the lost worker ran; if one was queued behind it, both run again alone.
        said = log.read_text()
        retried = re.search(r"(?:worker died during|a worker holding) #(\d+)", said)
        if retried is None:
            return False
        done = _evaluations(db, run)
        redone = [e.finished_at for e in done if e.candidate_id == int(retried[1])]
        return bool(redone) and sum(e.finished_at > redone[0] for e in done) >= WENT_ON

    try:
        wait_for_driver(on_both, "evaluations never ran on both worker nodes", driver, log)
        victim, survivor = first_nodes
        nodes.kill(victim)
        killed_at = time.time()
        wait_for_driver(went_on, f"the run did not go on without {victim}", driver, log)
        fresh = nodes.add_worker()
        try:
            code = driver.wait(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"the driver had not finished {RUN_TIMEOUT_S:.0f} s after {fresh.name} joined: "
                f"the loop hangs. Its output:\n{log.read_text()[-6000:]}"
            )
    finally:
        _stop(driver)
    output = log.read_text()
    assert code == 0, output
    with Store(db) as store:
        record = store.get_run(run)
        outlines = store.candidate_outlines(run)
    evaluations = _evaluations(db, run)
    assert record is not None and record.status == "finished", output
    assert len(outlines) == BUDGET, output
    pending = [c.id for c in outlines if c.status == "pending"]
    assert not pending, f"candidates never evaluated: {pending}"
    evaluated: dict[int, int] = defaultdict(int)
    for evaluation in evaluations:
        if evaluation.kind == "evaluate":
            evaluated[evaluation.candidate_id] += 1
    twice = {id_: n for id_, n in evaluated.items() if n != 1}
    missing = [c.id for c in outlines if c.id not in evaluated]
    assert not twice and not missing, f"evaluated more than once: {twice}; never: {missing}"

    per_host = _per_host(evaluations)
    assert set(per_host) == {*first_nodes, fresh.name}, dict(per_host)
    assert any(e.finished_at > killed_at for e in per_host[survivor])
    node_ids = {
        host: {e.sandbox["node"]["node_id"] for e in done} for host, done in per_host.items()
    }
    assert all(len(ids) == 1 for ids in node_ids.values()), node_ids  # one Ray node each
    assert len({next(iter(ids)) for ids in node_ids.values()}) == len(node_ids), node_ids

    finished = sorted(e.finished_at for e in evaluations)
    gap, after = max((b - a, a) for a, b in pairwise(finished))
    assert gap < START_DEADLINE_S, (
        f"the loop stalled {gap:.1f} s (from {after - killed_at:+.1f} s after the kill); "
        f"the pool's start deadline is {START_DEADLINE_S:.0f} s"
    )


def _per_host(evaluations: list[EvaluationRecord]) -> dict[str, list[EvaluationRecord]]:
    """By the host each ran on: a worker node's container name."""
    found: dict[str, list[EvaluationRecord]] = defaultdict(list)
    for evaluation in evaluations:
        found[evaluation.sandbox["node"]["host"]].append(evaluation)
    return found
