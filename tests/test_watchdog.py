"""The driver's watchdog: an evaluation worker that stops answering is killed at the
evaluation's deadline and replaced, its candidate is recorded as `timeout`, and the run goes
on. On Ray and on the local executor, a real store, and a worker process really stopped with
SIGSTOP."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from evolve.engine.loop import Engine
from evolve.evaluators.synthetic import SyntheticEvaluator
from evolve.executors import Executor
from evolve.executors.local import LocalExecutor
from evolve.executors.on_ray import RayExecutor
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult
from evolve.plugin.sandbox import Limits, Sandbox
from evolve.plugin.watchdog import (
    DEFAULT_SANDBOX_RUNS,
    MIN_MARGIN_S,
    SANDBOX_GRACE_S,
    Watchdog,
    evaluation_deadline,
)
from evolve.runtime.processes import start_time
from evolve.store import Store
from evolve.task.loading import load_task
from tests.conftest import write_synthetic_task
from tests.helpers.engine_runs import Recorder

RAY_KILL_GRACE_S = 5  # measured: ray.kill SIGKILLs a worker that does not answer after this
LOCAL_KILL_GRACE_S = 0  # the local executor SIGKILLs its worker process at once


class StopsItsWorker(SyntheticEvaluator):
    """The synthetic evaluator, except that the first candidate after the seed stops the
    worker evaluating it, as a candidate that ptrace-attached to its parent once did, each
    time it is evaluated (a worker lost while it held two jobs runs both again, alone:
    evolve/engine/dispatch.py). Every worker claims the same marker file first, so exactly one
    candidate does it; each worker it stops adds its pid to the marker."""

    def __init__(self, params: Mapping[str, Any], task_dir: Path, marker: Path) -> None:
        super().__init__(params, task_dir)
        self.marker = marker
        self.seed_hash = ""

    def worst_case_s(self, limits: Limits) -> float:
        return 1.0  # no sandbox runs: the deadline is the margin

    def prepare(self, seed: Program, sandbox: Sandbox, workdir: Path) -> None:
        super().prepare(seed, sandbox, workdir)
        self.seed_hash = seed.code_hash

    def evaluate(self, program: Program, sandbox: Sandbox, *, seed: int) -> EvalResult:
        if program.code_hash != self.seed_hash and self._claimed(program):
            with open(self.marker, "a") as marker:
                marker.write(f" {os.getpid()}")
            os.kill(os.getpid(), signal.SIGSTOP)
        return super().evaluate(program, sandbox, seed=seed)

    def _claimed(self, program: Program) -> bool:
        """Whether `program` is the one that stops its worker: the first to claim it."""
        try:
            fd = os.open(self.marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return self.marker.read_text().split()[0] == program.code_hash
        os.write(fd, program.code_hash.encode())
        os.close(fd)
        return True


def test_the_deadline_covers_every_sandbox_run_at_its_limit() -> None:
    limits = Limits(timeout_s=30)
    worst = DEFAULT_SANDBOX_RUNS * (30 + SANDBOX_GRACE_S)
    plain = SyntheticEvaluator({}, Path("."))  # the base's worst case: DEFAULT_SANDBOX_RUNS
    assert evaluation_deadline(plain, limits) == pytest.approx(1.25 * worst)
    assert evaluation_deadline(StopsItsWorker({}, Path("."), Path("m")), limits) == 1 + MIN_MARGIN_S
    watchdog: Watchdog[str] = Watchdog(0.0)
    watchdog.watch("a")
    watchdog.watch("b")
    watchdog.forget("b")
    assert watchdog.overdue() == ["a"]


@pytest.mark.usefixtures("ray_session")
def test_a_stopped_ray_worker_is_killed_at_the_deadline_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    _stop_a_worker(tmp_path, RayExecutor(), RAY_KILL_GRACE_S)  # Ray asks it to exit first


@pytest.mark.system
def test_a_stopped_worker_process_is_killed_at_the_deadline_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    _stop_a_worker(tmp_path, LocalExecutor(tmp_path), LOCAL_KILL_GRACE_S)


def _stop_a_worker(tmp_path: Path, executor: Executor, kill_grace_s: float) -> None:
    task = load_task(write_synthetic_task(tmp_path / "task", candidates=10, islands=1))
    store = Store(f"sqlite:///{tmp_path / 'evolve.db'}")
    run = store.create_run("r1", task_path=str(task.path), task_yaml=task.text, seed=5, settings={})
    marker = tmp_path / "stopped"
    evaluator = StopsItsWorker({"target": 100}, task.root, marker)
    recorder = Recorder()
    outcome = Engine(
        task, store, run, evaluator, executor, workers=1, results_dir=tmp_path / "out",
        observer=recorder,
    ).run()  # fmt: skip

    assert outcome.reason == "candidate budget reached (10)"
    code_hash, *pids = marker.read_text().split()
    ends = time.monotonic() + kill_grace_s + 5
    while any(start_time(int(pid)) is not None for pid in pids) and time.monotonic() < ends:
        time.sleep(0.1)
    assert all(start_time(int(pid)) is None for pid in pids), "a stopped worker is still there"
    evaluations = store.run_evaluations("r1")
    (stopped,) = [e for e in evaluations if store.candidate(e.candidate_id).code_hash == code_hash]
    assert stopped.status == "timeout" and store.candidate(stopped.candidate_id).status == "timeout"
    # No other candidate is blamed, not even one its worker held beside the stopped one.
    assert all(e.status == "ok" for e in evaluations if e is not stopped)
    assert "exceeded its deadline of 11 s" in stopped.feedback
    assert "worker was killed and replaced" in stopped.feedback
    later = [e for e in evaluations if e.started_at > stopped.finished_at and e.status == "ok"]
    assert later, "nothing was evaluated after the stopped worker was replaced"
    assert len([e for e in evaluations if e.kind == "evaluate"]) == 10
    assert any("past its deadline" in e.text for e in recorder.events if e.kind == "warning")
