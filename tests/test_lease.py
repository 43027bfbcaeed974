"""What a driver may ask of a store and a cluster: one driver per run (two real `evolve run`
drivers on one run, the second refused while the first runs and let in once it has
stopped; the lease itself is in tests/test_store.py), no more workers than CPUs, and the
machine each evaluation ran on, recorded with it."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from evolve.store import Store
from tests.conftest import write_synthetic_task

EVOLVE = [sys.executable, "-m", "evolve"]


def _wait_for(condition, what: str, driver: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while not condition():
        assert driver.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"{what}:\n{log.read_text()}"
        time.sleep(0.2)


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
        _wait_for(evaluating, "the first driver never evaluated", first, log)
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
    assert "started on" in again.stdout and ": shared" in again.stdout


def test_more_workers_than_the_cluster_has_cpus_are_lowered_with_a_warning(
    tmp_path: Path,
) -> None:
    task = write_synthetic_task(tmp_path / "task", candidates=4)
    done = subprocess.run(
        [*EVOLVE, "run", str(task), "--workers", "64", "--plain"],
        cwd=tmp_path, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "64 workers asked for, but the cluster has" in done.stdout
    assert "finished: candidate budget reached (4)" in done.stdout
    with Store(f"sqlite:///{tmp_path / 'results' / 'evolve.db'}") as store:
        (evaluation, *_) = store.evaluations(1)
    node = evaluation.sandbox["node"]  # where the seed's evaluation ran, from the worker
    assert node["host"] == socket.gethostname() and node["cpu"] and len(node["node_id"]) > 12
    shown = subprocess.run(
        [*EVOLVE, "show", "1"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert f"on {node['host']} ({node['cpu']}), Ray node {node['node_id'][:12]}" in shown.stdout
