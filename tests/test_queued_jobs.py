"""While evaluations are fast, a busy worker gets a second job queued behind the one it
runs (evolve/engine/dispatch.py), which it starts without waiting for the driver; slow ones go one
at a time; a worker lost while it held two jobs judges neither, and both run again alone.
Real Ray (and for the lost worker, the local executor's worker processes too), a real store,
the synthetic evaluator."""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import ray

from evolve.engine.events import Snapshot
from evolve.executors import Actor, Executor
from evolve.executors.local import LocalExecutor
from evolve.executors.on_ray import RayActor, RayExecutor
from evolve.executors.process_actor import ProcessActor
from evolve.store import EvaluationRecord
from tests.helpers.pools import watched_engine


@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize(("delay_s", "most"), [(0.0, 2), (0.6, 1)])
def test_fast_evaluations_are_queued_two_to_a_worker_and_slow_ones_are_not(
    tmp_path: Path, delay_s: float, most: int
) -> None:
    engine, store, watcher = watched_engine(
        tmp_path,
        RayExecutor(),
        workers=1,
        candidates=6,
        params=f"{{target: 100, delay_s: {delay_s}}}",
    )
    outcome = engine.run()
    assert outcome.reason == "candidate budget reached (6)"
    assert max(snapshot.in_flight for snapshot in watcher.snapshots) == most
    evaluated = Counter(e.candidate_id for e in store.run_evaluations("r") if e.kind == "evaluate")
    assert len(evaluated) == 6 and set(evaluated.values()) == {1}


def _ray_kill(worker: Actor) -> None:
    """As Ray ends an actor whose node is lost: not through the executor."""
    assert isinstance(worker, RayActor)
    ray.kill(worker.handle, no_restart=True)


def _sigkill(worker: Actor) -> None:
    """From outside, as the kernel's OOM killer would: the executor did not stop it."""
    assert isinstance(worker, ProcessActor)
    os.kill(worker.pid, signal.SIGKILL)


def _lose_a_worker_holding_two_jobs(
    tmp_path: Path, executor: Executor, kill: Callable[[Actor], None]
) -> None:
    engine, store, watcher = watched_engine(
        tmp_path, executor, workers=1, candidates=12, params="{target: 100, delay_s: 0.2}"
    )
    killed: list[int] = []

    def kill_a_worker_holding_two_jobs(snapshot: Snapshot) -> None:
        if not killed and snapshot.in_flight == 2 and snapshot.evaluated >= 3:
            (worker,) = engine.pool.busy
            killed.append(snapshot.evaluated)
            kill(worker)

    watcher.on_tick = kill_a_worker_holding_two_jobs
    outcome = engine.run()
    assert killed, "the worker never held a queued job"
    assert outcome.reason == "candidate budget reached (12)"
    evaluations = [e for e in store.run_evaluations("r") if e.kind == "evaluate"]
    per_candidate = Counter(e.candidate_id for e in evaluations)
    assert len(per_candidate) == 12 and set(per_candidate.values()) == {1}
    assert all(e.status == "ok" for e in evaluations)
    texts = [e.text for e in watcher.events]
    assert not [t for t in texts if t.startswith("worker died during")], texts
    (lost,) = [t for t in texts if "and a job queued behind it was lost" in t]
    assert lost.endswith("both run again, alone")
    assert len({e.worker for e in evaluations}) == 2  # the lost worker and its successor


@pytest.mark.usefixtures("ray_session")
def test_a_ray_worker_lost_with_a_job_queued_judges_neither_and_runs_both_again_alone(
    tmp_path: Path,
) -> None:
    _lose_a_worker_holding_two_jobs(tmp_path, RayExecutor(), _ray_kill)


@pytest.mark.system
def test_a_worker_process_lost_with_a_job_queued_judges_neither_and_runs_both_again_alone(
    tmp_path: Path,
) -> None:
    _lose_a_worker_holding_two_jobs(tmp_path, LocalExecutor(tmp_path), _sigkill)


@pytest.mark.usefixtures("ray_session")
def test_a_re_measurement_gets_a_worker_while_fast_evaluations_keep_coming(
    tmp_path: Path,
) -> None:
    """A re-measurement waits for an idle worker (it asks for a machine kind); were jobs
    still queued behind busy workers meanwhile, no worker would ever be idle, and every
    re-measurement would wait for the run's end. Counted: the new candidates whose
    evaluation started while a re-measurement waited (from its candidate's first result)."""
    engine, store, _ = watched_engine(
        tmp_path, RayExecutor(), workers=2, candidates=30, params="{target: 200, delay_s: 0.1}"
    )
    assert engine.run().reason == "candidate budget reached (30)"
    evaluations = store.run_evaluations("r")
    first: dict[int, EvaluationRecord] = {}
    for e in evaluations:
        first.setdefault(e.candidate_id, e)
    new = [e.started_at for e in evaluations if e.kind == "evaluate"]
    overtaken = [
        sum(first[e.candidate_id].finished_at < started < e.started_at for started in new)
        for e in evaluations
        if e.kind == "remeasure"
    ]
    assert len(overtaken) >= 3
    # At most the jobs already held by the workers when it came: each worker's two, less
    # the one that just finished. Queued behind busy workers meanwhile, it was 5 to 10.
    assert max(overtaken) <= 2 * 2 - 1, overtaken
