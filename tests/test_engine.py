"""The evolution loop end to end on a real SQLite store, its workers the local executor's
child processes (and, for one whole run, Ray actors), with the synthetic evaluator so that
the engine's own behaviour is what is tested."""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import event

from evolve.engine import outage
from evolve.engine.champion import is_flagged
from evolve.engine.loop import Engine
from evolve.evaluators.synthetic import SyntheticEvaluator
from evolve.executors import Executor
from evolve.executors.local import LocalExecutor
from evolve.executors.on_ray import RayExecutor
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult
from evolve.plugin.sandbox import Sandbox, SandboxUnavailable
from evolve.store import Store
from evolve.task.loading import load_task, make_evaluator
from tests.conftest import write_synthetic_task
from tests.helpers.engine_runs import Recorder, run_engine


def reaches_its_budget_improves_and_keeps_full_lineage(tmp_path: Path, executor: Executor) -> None:
    task_file = write_synthetic_task(tmp_path / "task", candidates=60, migration_interval=5)
    outcome, store, recorder = run_engine(tmp_path, task_file, executor=executor)

    assert outcome.reason.startswith("candidate budget reached")
    assert store.count_candidates("r1") == 60
    assert store.pending_candidates("r1") == []
    seed = store.seed_candidate("r1")
    assert seed is not None and seed.parent_ids == ()
    best = outcome.best
    assert best is not None and best.score is not None
    assert best.score > seed.score  # distance to 100 shrank from the seed's 97
    assert best.measurements >= 2  # a champion is re-measured before it is crowned
    assert (tmp_path / "results" / "r1" / "best" / "seed.py").read_text() == best.program.files[
        "seed.py"
    ]
    for candidate in store.top("r1", 60):
        lineage = store.lineage(candidate.id)
        assert lineage[-1].id == seed.id
        kinds = Counter(e.kind for e in store.evaluations(candidate.id))
        assert kinds["evaluate"] == 1
    assert store.migrations("r1"), "ring migration never ran"
    assert any(e.kind == "best" for e in recorder.events)
    assert not any(is_flagged(store.evaluations(c.id)) for c in store.top("r1", 60))
    assert recorder.snapshots[-1].candidates == 60


@pytest.mark.system
def test_a_run_on_the_local_executor_reaches_its_budget_improves_and_keeps_full_lineage(
    tmp_path: Path,
) -> None:
    reaches_its_budget_improves_and_keeps_full_lineage(tmp_path, LocalExecutor(tmp_path))


@pytest.mark.usefixtures("ray_session")
def test_a_run_on_ray_reaches_its_budget_improves_and_keeps_full_lineage(tmp_path: Path) -> None:
    reaches_its_budget_improves_and_keeps_full_lineage(tmp_path, RayExecutor())


@pytest.mark.system
def test_failing_candidates_are_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    # The seed's knobs sum to 3, so nearly every step towards the target of 100 fails.
    task_file = write_synthetic_task(
        tmp_path / "task", candidates=40, params="{target: 100, fail_above: 3.5}"
    )
    outcome, store, recorder = run_engine(tmp_path, task_file)

    counts = store.status_counts("r1")
    assert counts.get("check_failed", 0) > 0 and counts.get("ok", 0) > 0
    assert sum(counts.values()) == 40
    failures = [e for e in recorder.events if e.kind == "failure" and e.candidate_id]
    assert failures
    failed = store.candidate(failures[0].candidate_id)
    assert failed is not None and failed.status == "check_failed" and failed.score is None
    assert "exceeds 3.5" in store.evaluations(failed.id)[0].feedback
    # The event quotes the failing stage's own line, numbers and all.
    assert re.fullmatch(
        rf"#{failed.id} check_failed: \[check\] knob sum [\d.]+ exceeds 3\.5", failures[0].text
    )
    assert outcome.best is not None and outcome.best.score is not None


@pytest.mark.system
def test_a_failing_seed_ends_the_run_with_a_reason(tmp_path: Path) -> None:
    task_file = write_synthetic_task(tmp_path / "task", params="{target: 100, fail_above: 1}")
    outcome, store, _ = run_engine(tmp_path, task_file)
    assert "the seed is not usable (status check_failed)" in outcome.reason
    assert outcome.best is None
    assert store.count_candidates("r1") == 1


@pytest.mark.system
def test_the_wall_time_budget_holds_with_evaluations_in_flight(tmp_path: Path) -> None:
    """Each evaluation takes a minute; the budget is 2 s and one sandbox run's limit 1 s.
    The run must not wait for the minute: it ends about a second past its budget, and the
    candidate it abandoned stays pending for --resume."""
    task_file = write_synthetic_task(tmp_path / "task", params="{target: 100, delay_s: 60}")
    text = task_file.read_text().replace(
        "  candidates: 30\n", "  candidates: 30\n  wall_time_s: 2\n"
    )
    task_file.write_text(
        text.replace("  backend: process\n", "  backend: process\n  timeout_s: 1\n")
    )
    started = time.monotonic()
    outcome, store, recorder = run_engine(tmp_path, task_file, workers=1)
    took = time.monotonic() - started

    assert outcome.reason.startswith("wall-time budget reached")
    assert took < 45, f"the run waited {took:.0f}s for an evaluation past its budget"
    assert [c.id for c in store.pending_candidates("r1")] == [outcome.seed_id]
    assert store.evaluations(outcome.seed_id) == []
    abandoned = [e.text for e in recorder.events if "abandoned" in e.text]
    assert abandoned and abandoned[0].startswith("1 evaluation(s) and 0 proposal(s)")


class SandboxDownFirst(SyntheticEvaluator):
    """The synthetic evaluator behind a sandbox that is down for its first calls, as while a
    Docker daemon restarts: the double stands in for the outage, not for the engine."""

    def __init__(self, params: dict, task_dir: Path) -> None:
        super().__init__(params, task_dir)
        self.calls = 0

    def evaluate(self, program: Program, sandbox: Sandbox, *, seed: int) -> EvalResult:
        self.calls += 1
        if self.calls <= 3:
            raise SandboxUnavailable(f"docker daemon unreachable (outage number {self.calls})")
        return super().evaluate(program, sandbox, seed=seed)


@pytest.mark.system
def test_an_unavailable_sandbox_delays_jobs_but_loses_and_records_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outage, "UNAVAILABLE_RETRY_S", 0.2)
    task = load_task(write_synthetic_task(tmp_path / "task", candidates=12))
    store = Store(f"sqlite:///{tmp_path / 'evolve.db'}")
    run = store.create_run("r1", task_path=str(task.path), task_yaml=task.text, seed=1, settings={})
    recorder = Recorder()
    evaluator = SandboxDownFirst({"target": 100}, task.root)
    outcome = Engine(
        task, store, run, evaluator, LocalExecutor(tmp_path), workers=1,
        results_dir=tmp_path / "out", observer=recorder,
    ).run()  # fmt: skip

    assert outcome.reason == "candidate budget reached (12)"
    statuses = {e.status for e in store.run_evaluations("r1")}
    assert statuses == {"ok"}, "an outage must not be recorded against a candidate"
    assert len([e for e in store.run_evaluations("r1") if e.kind == "evaluate"]) == 12
    warnings = [e for e in recorder.events if e.kind == "warning"]
    assert len(warnings) == 3 and "outage number 1" in warnings[0].text


@pytest.mark.system
def test_a_resumed_run_picks_its_parents_without_reading_them_one_by_one(
    tmp_path: Path,
) -> None:
    """Its best candidates are read together as it resumes (evolve/engine/candidate_cache.py):
    the parents it picks among them cost no read of their own in the loop."""
    run_engine(tmp_path, write_synthetic_task(tmp_path / "first", candidates=40))[1].close()
    store = Store(f"sqlite:///{tmp_path / 'evolve.db'}")
    task = load_task(write_synthetic_task(tmp_path / "more", candidates=80))
    engine = Engine(
        task,
        store,
        store.get_run("r1"),
        make_evaluator(task),
        LocalExecutor(tmp_path),
        workers=2,
        results_dir=tmp_path / "results",
    )
    one_by_one: list[str] = []

    def note(conn: object, cursor: object, statement: str, *rest: object) -> None:
        if statement.startswith("SELECT") and "WHERE candidates.id = " in statement:
            one_by_one.append(statement)

    event.listen(store._engine, "before_cursor_execute", note)
    outcome = engine.run()

    assert outcome.reason.startswith("candidate budget reached")
    assert store.count_candidates("r1") == 80
    # Only the run's best, read afresh as the run ends.
    assert len(one_by_one) == 1
    store.close()
