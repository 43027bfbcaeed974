"""What a driver may ask of a store and a cluster: one driver per run (two real `evolve run`
drivers on one run, the second refused while the first runs and let in once it has
stopped; the lease itself is in tests/test_store.py), no more workers than CPUs, and the
machine each evaluation ran on, recorded with it."""

from __future__ import annotations

import signal
import socket
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy.exc import IntegrityError

from evolve.engine.loop import Engine
from evolve.executors.local import LocalExecutor
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult
from evolve.runtime import lease
from evolve.runtime.lease import RunTakenOver
from evolve.store import Store
from evolve.task.loading import load_task, make_evaluator
from tests.conftest import EVOLVE, postgres_schema, wait_for_driver, write_synthetic_task

OTHER_DRIVER = {"host": "elsewhere", "pid": 1, "started": 1.0, "user": "someone"}


@pytest.mark.system
def test_a_second_driver_on_a_running_run_is_refused_and_says_who_holds_it(
    tmp_path: Path,
) -> None:
    task = write_synthetic_task(tmp_path / "task", candidates=100000, params="{delay_s: 0.5}")
    log = tmp_path / "first.log"
    first = subprocess.Popen(
        [*EVOLVE, "run", str(task), "--name", "shared", "--workers", "1", "--plain"],
        cwd=tmp_path, stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    database = tmp_path / "results" / "evolve.db"

    def evaluating() -> bool:
        if not database.exists():
            return False
        with Store(f"sqlite:///{database}") as store:
            return store.count_candidates("shared") > 1

    try:
        wait_for_driver(evaluating, "the first driver never evaluated", first, log)
        second = subprocess.run(
            [*EVOLVE, "run", "--resume", "shared", "--plain"],
            cwd=tmp_path, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert second.returncode == 2, second.stdout + second.stderr
        assert f"run shared is being driven by pid {first.pid}" in second.stderr
        assert "its lease lapses 60 s after its last heartbeat" in second.stderr
        first.send_signal(signal.SIGINT)
        assert first.wait(timeout=60) == 130, log.read_text()
    finally:
        first.kill()
    again = subprocess.run(
        [*EVOLVE, "run", "--resume", "--plain", "--candidates", "3"],
        cwd=tmp_path, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert "your latest run on this machine" in again.stdout and "is shared" in again.stdout


@pytest.mark.system
@pytest.mark.parametrize("ray", [False, True], ids=["this machine", "a private Ray instance"])
def test_more_workers_than_the_cluster_has_cpus_are_lowered_with_a_warning(
    tmp_path: Path, ray: bool
) -> None:
    task = write_synthetic_task(tmp_path / "task", candidates=4)
    on_ray = ["--ray-address", "local"] if ray else []
    done = subprocess.run(
        [*EVOLVE, "run", str(task), "--workers", "64", "--plain", *on_ray],
        cwd=tmp_path, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    where = "the cluster has" if ray else "this machine has"
    assert f"64 workers asked for, but {where}" in done.stdout
    assert "finished: candidate budget reached (4)" in done.stdout
    with Store(f"sqlite:///{tmp_path / 'results' / 'evolve.db'}") as store:
        (evaluation, *_) = store.evaluations(1)
    node = evaluation.sandbox["node"]  # where the seed's evaluation ran, from the worker
    assert node["host"] == socket.gethostname() and node["cpu"]
    if ray:
        assert len(node["node_id"]) > 12  # Ray's node id
    else:
        assert node["node_id"] == node["host"]  # on one machine, the node is the host
    shown = subprocess.run(
        [*EVOLVE, "show", "1"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert f"on {node['host']} ({node['cpu']})" in shown.stdout


@pytest.mark.system
def test_a_driver_whose_run_was_taken_over_stops_and_leaves_the_run_alone(
    tmp_path: Path,
) -> None:
    """As if this driver had been suspended past its lease and another had taken the run:
    at its next heartbeat it stops, and neither ends the run nor frees it: the run is the
    new driver's now."""
    task = write_synthetic_task(tmp_path / "task", candidates=100000, params="{delay_s: 0.2}")
    log = tmp_path / "first.log"
    first = subprocess.Popen(
        [*EVOLVE, "run", str(task), "--name", "taken", "--workers", "1", "--plain"],
        cwd=tmp_path, stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"sqlite:///{tmp_path / 'results' / 'evolve.db'}"

    def evaluating() -> bool:
        if not (tmp_path / "results" / "evolve.db").exists():
            return False
        with Store(url) as store:
            return store.count_candidates("taken") > 1

    try:
        wait_for_driver(evaluating, "the first driver never evaluated", first, log)
        with Store(url) as store:
            assert store.take_lease("taken", OTHER_DRIVER, 0.0) is None  # any lease is stale
        assert first.wait(timeout=60) == 1, log.read_text()
    finally:
        first.kill()
    assert "another driver took run taken over; stopped" in log.read_text()
    with Store(url) as store:
        after = store.get_run("taken")
    assert after is not None and after.status == "running"
    assert after.driver is not None and after.driver["host"] == "elsewhere"


def test_a_driver_that_wakes_past_its_lease_asks_the_store_before_it_writes(
    tmp_path: Path,
) -> None:
    """A lease renewed within LEASE_S - RENEW_S is ours without asking; an older one (the
    driver was suspended, its heartbeat thread too) is renewed at once by whoever asks, and
    the answer is no once another driver has taken the run."""
    with Store(f"sqlite:///{tmp_path / 'evolve.db'}") as store:
        store.create_run("r", task_path="t", task_yaml="", seed=0, settings={})
        me = lease.holder()
        lease.take(store, "r", me)
        beat = lease.Heartbeat(store, "r", me)
        assert store.take_lease("r", OTHER_DRIVER, 0.0) is None
        assert beat.holds()  # fresh: no query, and nobody could have taken a fresh lease
        beat.renewed_at -= lease.LEASE_S  # as after a suspension
        assert not beat.holds() and beat.lost


@pytest.mark.postgres
def test_a_renewal_in_the_drivers_thread_lets_its_failed_commit_through() -> None:
    """On PostgreSQL a turn commits on a thread of its own, and its failure is raised at the
    driver's next statement (evolve/store/commits.py). A renewal that is that statement
    must not take the failure for a blip of the store, which it logs and forgets."""
    with postgres_schema() as url, Store(url) as store:
        store.create_run("r", task_path="t", task_yaml="", seed=0, settings={})
        me = lease.holder()
        lease.take(store, "r", me)
        beat = lease.Heartbeat(store, "r", me)
        seed = store.plant_seed(
            "r", Program({"a.py": "# EVOLVE-BLOCK-START\nx = 1\n# EVOLVE-BLOCK-END\n"})
        )
        with store.turn():
            store.record_evaluation(
                replace(seed, id=10**6), EvalResult(status="ok"), kind="evaluate", score=1.0,
                input_seed=0, worker="w", started_at=0.0, finished_at=1.0,
            )  # fmt: skip
        beat.renewed_at -= lease.LEASE_S  # a renewal is due: the driver asks the store
        with pytest.raises(IntegrityError):
            beat.holds()
        assert beat.holds() and not beat.lost


@pytest.mark.system
def test_the_engine_writes_nothing_once_its_run_is_taken_over(tmp_path: Path) -> None:
    task = load_task(write_synthetic_task(tmp_path / "task", candidates=1000))
    store = Store(f"sqlite:///{tmp_path / 'evolve.db'}")
    run = store.create_run("r", task_path=str(task.path), task_yaml=task.text, seed=1, settings={})
    taken: list[tuple[int, float]] = []

    def holds_run() -> bool:
        if not taken and store.status_counts("r").get("ok", 0) >= 10:
            record = store.get_run("r")
            assert record is not None
            taken.append((len(store.run_evaluations("r")), record.wall_s_used))
        return not taken

    engine = Engine(
        task, store, run, make_evaluator(task), LocalExecutor(tmp_path), workers=1,
        results_dir=tmp_path, holds_run=holds_run,
    )  # fmt: skip
    with pytest.raises(RunTakenOver):
        engine.run()
    record = store.get_run("r")
    assert record is not None and taken
    assert (len(store.run_evaluations("r")), record.wall_s_used) == taken[0]
    assert not [p for p in store.proposals("r") if p.outcome == "interrupted"]
