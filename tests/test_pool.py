"""The pool never holds the loop up: a worker that Ray cannot place is given up after a
deadline while the others go on, the pool grows back when a CPU frees, a lost worker's
successor is waited for by nobody, and the seed's retry goes to another worker.

"No room" is made on the real local Ray instance by actors that hold CPUs."""

from __future__ import annotations

import re
import socket
import time
from collections import Counter
from contextlib import closing
from pathlib import Path

import pytest
import ray
from ray.actor import ActorHandle

from evolve.engine import pool
from evolve.engine.events import Event
from evolve.engine.loop import Outcome
from evolve.engine.pool import WorkerPool
from evolve.engine.workers import Placement
from evolve.executors.local import LocalExecutor
from evolve.executors.on_ray import RayActor, RayExecutor
from evolve.store import Store
from tests.helpers.pools import watched_engine


@ray.remote(num_cpus=1)
class CpuHog:
    def ping(self) -> None:
        return None


def _cpus() -> int:
    return int(ray.cluster_resources()["CPU"])


def _hold_cpus(count: int) -> list[ActorHandle]:
    hogs = [CpuHog.remote() for _ in range(count)]  # type: ignore[attr-defined]
    ray.get([hog.ping.remote() for hog in hogs])
    return hogs


def _let_go(hogs: list[ActorHandle]) -> None:
    for hog in hogs:
        ray.kill(hog)


@pytest.fixture
def quick_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool, "START_DEADLINE_S", 5.0)  # room for a loaded machine's start
    monkeypatch.setattr(pool, "ROOM_POLL_S", 0.5)


def _workers_after(store: Store, since: float) -> set[str]:
    return {e.worker for e in store.run_evaluations("r") if e.started_at >= since}


@pytest.mark.usefixtures("ray_session", "quick_pool")
def test_a_worker_with_no_room_is_given_up_and_the_pool_grows_back_when_a_cpu_frees(
    tmp_path: Path,
) -> None:
    budget = 150
    spare = _hold_cpus(_cpus() - 2)
    hog = _hold_cpus(1)[0]  # all but one CPU are taken before the run starts
    engine, store, watcher = watched_engine(
        tmp_path, RayExecutor(), workers=2, candidates=budget, params="{target: 100, delay_s: 0.1}"
    )
    freed: list[float] = []
    placed: list[str] = []  # when one was given up

    def free_the_cpu(event: Event) -> None:
        if "was not placed within 5 s" in event.text and not freed:
            placed.extend(where.name.split("@")[0] for where in engine.pool.workers.values())
            ray.kill(hog)
            freed.append(time.time())

    watcher.on_event = free_the_cpu
    try:
        outcome: Outcome = engine.run()
    finally:
        _let_go(spare)
    texts = watcher.texts()
    assert outcome.reason == f"candidate budget reached ({budget})"
    shrunk = next(t for t in texts if "was not placed within 5 s" in t)
    # The worker given up is the one with no room; the other, placed, may still be starting
    # on a loaded machine.
    assert len(placed) == 1 and shrunk.split()[0] not in placed, (placed, shrunk)
    ready = r"(1 of 2 worker\(s\) ready|0 of 2 worker\(s\) ready and 1 starting);"
    assert re.search(f"the pool has {ready}", shrunk), shrunk
    assert "the pool is back to 2 worker(s)" in texts
    assert texts.index(shrunk) < texts.index("the pool is back to 2 worker(s)")
    assert any(s.workers.startswith("workers 1/2") for s in watcher.snapshots)
    assert watcher.snapshots[-1].workers == ""  # whole again: the board says nothing
    assert len(_workers_after(store, freed[0])) == 2, "the grown pool did not evaluate"


@pytest.mark.usefixtures("ray_session", "quick_pool")
def test_the_loop_goes_on_while_a_lost_workers_successor_has_no_room(tmp_path: Path) -> None:
    budget = 160
    engine, store, watcher = watched_engine(
        tmp_path, RayExecutor(), workers=2, candidates=budget, params="{target: 100, delay_s: 0.1}"
    )
    spare = _hold_cpus(_cpus() - 2)  # the run's two workers take the rest
    hogs: list[ActorHandle] = []
    lost_at: list[float] = []
    shrunk_at: list[float] = []

    def lose_a_worker(event: Event) -> None:
        if event.kind == "best" and not hogs and engine.pool.ready_count() == 2:
            victim = next(iter(engine.pool.busy), None) or engine.pool.idle[0]
            assert isinstance(victim, RayActor)
            lost_at.append(time.time())
            ray.kill(victim.handle, no_restart=True)
            # The loop waits for this call, so the hog takes the freed CPU before the loop
            # can ask for the lost worker's successor.
            hogs.extend(_hold_cpus(1))
        elif "was not placed within 5 s" in event.text and hogs and not shrunk_at:
            shrunk_at.append(time.time())
            ray.kill(hogs[0])

    watcher.on_event = lose_a_worker
    try:
        outcome = engine.run()
    finally:
        _let_go(spare)
    texts = watcher.texts()
    assert outcome.reason == f"candidate budget reached ({budget})", texts
    assert lost_at and shrunk_at, f"no worker was lost, or its successor found room: {texts}"
    assert "the pool is back to 2 worker(s)" in texts
    evaluations = store.run_evaluations("r")
    # Every candidate evaluated once: none lost with the worker, none done twice.
    per_candidate = Counter(e.candidate_id for e in evaluations if e.kind == "evaluate")
    assert set(per_candidate.values()) == {1}
    assert len(per_candidate) == budget
    # The survivor kept evaluating while nobody could place the successor.
    meanwhile = [e for e in evaluations if lost_at[0] < e.finished_at < shrunk_at[0]]
    assert meanwhile, "the loop waited for the lost worker's successor"


@pytest.mark.system
def test_the_first_worker_starts_alone_and_the_rest_once_it_is_placed(tmp_path: Path) -> None:
    """The seed waits for one worker only: the others' interpreters start once the first is
    placed, not beside it on the same CPUs, and the pool still reaches its size."""
    executor = LocalExecutor(tmp_path)
    asked: list[tuple[str, list[str]]] = []  # each worker asked for, and those placed by then
    ask = executor.evaluation_worker

    def noted(*args: object) -> object:
        asked.append((str(args[-1]), [p.name for p in engine.pool.workers.values()]))
        return ask(*args)  # type: ignore[arg-type]

    executor.evaluation_worker = noted  # type: ignore[method-assign]
    engine, _, watcher = watched_engine(
        tmp_path, executor, workers=3, candidates=30, params="{target: 100, delay_s: 0.1}"
    )
    with closing(executor):
        outcome = engine.run()
    assert outcome.best is not None
    assert [name for name, _ in asked] == ["worker-0", "worker-1", "worker-2"]
    assert asked[0][1] == []
    assert all(placed == [f"worker-0@{socket.gethostname()}"] for _, placed in asked[1:]), asked
    assert any("ready (3 of 3)" in text for text in watcher.texts()), watcher.texts()


def test_take_asks_for_a_machine_kind_and_avoids_a_worker_where_it_can() -> None:
    """The choice alone, with names standing in for actor handles: one machine here cannot
    show two CPU models."""
    workers = WorkerPool.__new__(WorkerPool)
    places = {
        "a": Placement("worker-0@n1", "id1", "n1", "Xeon"),
        "b": Placement("worker-1@n1", "id1", "n1", "EPYC"),
        "c": Placement("worker-2@n2", "id2", "n2", "Xeon"),
    }
    workers.workers = places  # type: ignore[assignment]
    workers.placing, workers.preparing, workers._held = {}, {}, 0

    def take(idle: list[str], busy: set[str], **ask: str) -> str | None:
        workers.idle = list(idle)  # type: ignore[arg-type]
        workers.busy = dict.fromkeys(busy, 1)  # type: ignore[arg-type]
        workers.one_job = dict.fromkeys(busy)  # type: ignore[arg-type]
        return workers.take(**ask)  # type: ignore[return-value]

    assert take(["a", "b"], set(), cpu="EPYC") == "b"
    assert take(["a"], {"b"}, cpu="EPYC") is None  # an EPYC is busy: wait for it
    assert take(["a"], set(), cpu="EPYC") == "a"  # no EPYC left: any worker will do
    assert take(["a", "b", "c"], set(), avoid="worker-0@n1") == "c"  # another host first
    assert take(["a", "b"], set(), avoid="worker-0@n1") == "b"  # then another worker
    assert take(["a"], {"c"}, avoid="worker-0@n1") is None  # c will be free soon
    assert take(["a"], set(), avoid="worker-0@n1") == "a"  # the only worker there is
