"""An engine whose events a test can act on as they happen, for the worker pool's tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from evolve.engine.events import Event, Snapshot
from evolve.engine.loop import Engine
from evolve.executors import Executor
from evolve.store import Store
from evolve.task.loading import load_task, make_evaluator
from tests.conftest import write_synthetic_task


class Watcher:
    """Records what the board is told, and lets a test act on an event as it happens."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.snapshots: list[Snapshot] = []
        self.on_event: Callable[[Event], None] = lambda event: None
        self.on_tick: Callable[[Snapshot], None] = lambda snapshot: None

    def event(self, event: Event) -> None:
        self.events.append(event)
        self.on_event(event)

    def tick(self, snapshot: Snapshot) -> None:
        self.snapshots.append(snapshot)
        self.on_tick(snapshot)

    def texts(self) -> list[str]:
        return [e.text for e in self.events]


def watched_engine(
    tmp_path: Path, executor: Executor, *, workers: int, candidates: int, params: str
) -> tuple[Engine, Store, Watcher]:
    """An Engine on the synthetic task with `params`, its workers on `executor`, its store in
    `tmp_path`, watched."""
    task = load_task(write_synthetic_task(tmp_path / "task", candidates=candidates, params=params))
    store = Store(f"sqlite:///{tmp_path / 'evolve.db'}")
    run = store.create_run("r", task_path=str(task.path), task_yaml=task.text, seed=3, settings={})
    watcher = Watcher()
    engine = Engine(
        task, store, run, make_evaluator(task), executor, workers=workers,
        results_dir=tmp_path / "results", observer=watcher,
    )  # fmt: skip
    return engine, store, watcher
