"""Whole runs of the engine in the test process, and an observer that records what it sent."""

from __future__ import annotations

from pathlib import Path

from evolve.engine.events import Event, Snapshot
from evolve.engine.loop import Engine, Outcome
from evolve.executors import Executor
from evolve.executors.local import LocalExecutor
from evolve.store import Store
from evolve.task.loading import load_task, make_evaluator


class Recorder:
    """An observer that keeps every event and snapshot the engine sends."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.snapshots: list[Snapshot] = []

    def event(self, event: Event) -> None:
        self.events.append(event)

    def tick(self, snapshot: Snapshot) -> None:
        self.snapshots.append(snapshot)


def run_engine(
    tmp_path: Path,
    task_file: Path,
    *,
    workers: int = 2,
    seed: int = 7,
    executor: Executor | None = None,
) -> tuple[Outcome, Store, Recorder]:
    """The task run to its end by an Engine on a SQLite store in `tmp_path`, as run "r1", its
    workers on `executor` (by default the local one, which logs to `tmp_path`)."""
    task = load_task(task_file)
    store = Store(f"sqlite:///{tmp_path / 'evolve.db'}")
    run = store.create_run(
        "r1", task_path=str(task.path), task_yaml=task.text, seed=seed, settings={}
    )
    recorder = Recorder()
    engine = Engine(
        task,
        store,
        run,
        make_evaluator(task),
        executor if executor is not None else LocalExecutor(tmp_path),
        workers=workers,
        results_dir=tmp_path / "results",
        observer=recorder,
    )
    return engine.run(), store, recorder
