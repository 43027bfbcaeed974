"""results/RUN/run.log: the engine's decisions and the full traceback of any crash, for the
operator after the fact. A real engine, its workers local or on real Ray, with a mutator
that really raises."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from evolve.engine import loop as engine_module
from evolve.engine.loop import Engine
from evolve.executors import Executor
from evolve.executors.local import LocalExecutor
from evolve.executors.on_ray import RayExecutor
from evolve.mutators.base import MutationRequest, Proposal
from evolve.runtime.runlog import run_log
from evolve.store import Store
from evolve.task.loading import load_task, make_evaluator
from tests.conftest import write_synthetic_task


class Crashes:
    """A mutator with a bug in it."""

    name = "autotuner"

    def propose(self, request: MutationRequest) -> Proposal:
        return self.broken_helper(request)

    def broken_helper(self, request: MutationRequest) -> Proposal:
        raise ZeroDivisionError(f"parent #{request.parent.id} divided by zero")


@pytest.mark.system
def test_a_mutator_that_raises_leaves_its_traceback_in_the_run_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mutator crashes in a proposal worker, a thread of the driver."""
    mutator_traceback_is_logged(tmp_path, monkeypatch, LocalExecutor(tmp_path))


@pytest.mark.usefixtures("ray_session")
def test_a_mutator_that_raises_on_ray_leaves_its_traceback_in_the_run_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mutator crashes in a Ray proposal worker, another process: its traceback must
    still reach the driver's log."""
    mutator_traceback_is_logged(tmp_path, monkeypatch, RayExecutor())


def mutator_traceback_is_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, executor: Executor
) -> None:
    task = load_task(write_synthetic_task(tmp_path / "task", candidates=5))
    store = Store(f"sqlite:///{tmp_path / 'evolve.db'}")
    run = store.create_run("r1", task_path=str(task.path), task_yaml=task.text, seed=1, settings={})
    monkeypatch.setattr(
        engine_module, "make_mutators", lambda *_, **__: ({"autotuner": Crashes()}, None)
    )
    engine = Engine(
        task, store, run, make_evaluator(task), executor, workers=1, results_dir=tmp_path
    )
    with run_log(tmp_path, "INFO") as path:
        outcome = engine.run()
    assert "proposals were all" in outcome.reason  # the run still ended cleanly
    logged = path.read_text()
    assert "Traceback (most recent call last)" in logged
    assert "in broken_helper" in logged and "ZeroDivisionError: parent #" in logged
    assert "starting 1 evaluation worker(s)" in logged  # the engine's own decisions are there too


def test_the_level_decides_what_is_kept_and_the_handler_goes_afterwards(tmp_path: Path) -> None:
    logger = logging.getLogger("evolve.test")
    with run_log(tmp_path, "WARNING") as path:
        logger.info("routine")
        logger.warning("worth knowing")
    logger.warning("after the run")
    logged = path.read_text()
    assert "worth knowing" in logged
    assert "routine" not in logged and "after the run" not in logged


@pytest.mark.usefixtures("ray_session")
def test_rays_own_warnings_go_to_the_file_and_not_the_terminal(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    ray_logger = logging.getLogger("ray.util.example")  # as Ray's modules name theirs
    with run_log(tmp_path, "INFO") as path:
        ray_logger.warning("an actor cannot be scheduled right now")
        ray_logger.info("routine Ray chatter")
    logged = path.read_text()
    assert "an actor cannot be scheduled right now" in logged
    assert "routine Ray chatter" not in logged
    shown = capfd.readouterr()
    assert "cannot be scheduled" not in shown.out + shown.err
    assert logging.getLogger("ray").handlers, "Ray's own terminal handler is back after the run"
