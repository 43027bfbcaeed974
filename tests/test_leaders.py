"""The live board's top 10 is kept by the engine in memory and read from the store only
when it changed: the in-memory ranking must agree with the store's, and the board must not
query a store whose top has not moved."""

from __future__ import annotations

import io
import random
from pathlib import Path

from rich.console import Console
from sqlalchemy import event

from evolve.engine.events import Snapshot
from evolve.engine.leaders import Leaders
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult, StageResult
from evolve.store import Store, default_url
from evolve.ui import dashboard
from evolve.ui.dashboard import Dashboard
from tests.conftest import store_record

RUN = "leaders"
PASSED = EvalResult.from_stages([StageResult("measure", True, 0.1, metrics={"ns": 1.0})])
FAILED = EvalResult.from_stages([StageResult("check", False, 0.1, feedback="wrong")])


def program(n: int) -> Program:
    return Program({"k.c": f"// EVOLVE-BLOCK-START\nint x = {n};\n// EVOLVE-BLOCK-END\n"})


def record(store: Store, candidate_id: int, score: float | None) -> float | None:
    result = PASSED if score is not None else FAILED
    after = store.record_evaluation(
        store_record(store, candidate_id), result, kind="evaluate", score=score, input_seed=0,
        worker="w", started_at=0.0, finished_at=0.0,
    )  # fmt: skip
    return after.score


def test_the_ranking_in_memory_is_the_stores(tmp_path: Path) -> None:
    rng = random.Random(7)
    leaders = Leaders()
    with Store(default_url(tmp_path)) as store:
        store.create_run(RUN, task_path="t", task_yaml="", seed=0, settings={})
        ids = []
        for n in range(300):
            child = store.add_candidate(
                RUN, program(n), parent_ids=[], island=0, generation=0, mutation={}
            )
            assert child is not None
            ids.append(child.id)
            # Ties (a coarse score), failures, and re-measurements of earlier candidates.
            score = None if rng.random() < 0.2 else float(rng.randint(0, 40))
            leaders.update(child.id, record(store, child.id, score))
            if rng.random() < 0.3:
                again = rng.choice(ids)
                worse = None if rng.random() < 0.3 else float(rng.randint(0, 40))
                leaders.update(again, record(store, again, worse))
            if n % 25 == 0:
                assert list(leaders.current()) == [c.id for c in store.top(RUN, 10)]
        assert list(leaders.current()) == [c.id for c in store.top(RUN, 10)]
        resumed = Leaders()
        resumed.restore((id_, score) for id_, _, score in store.scored(RUN))
        assert resumed.current() == leaders.current()


def test_the_version_moves_only_when_the_table_changed() -> None:
    leaders = Leaders(size=3)
    for candidate_id, score in [(1, 5.0), (2, 6.0), (3, 7.0)]:
        leaders.update(candidate_id, score)
    assert leaders.current() == (3, 2, 1)
    version = leaders.version
    leaders.update(4, 1.0)  # below the table
    leaders.update(5, 5.0)  # ties the last shown, but is younger: stays out
    assert leaders.current() == (3, 2, 1) and leaders.version == version
    leaders.update(2, 6.0)  # measured again, same score: the count of measurements moved
    assert leaders.version == version + 1
    leaders.update(3, None)  # the best failed a re-measurement
    assert leaders.current() == (2, 1, 5) and leaders.version == version + 2


def snapshot(leaders: int) -> Snapshot:
    return Snapshot(
        run_name=RUN, candidates=1, budget_candidates=10, elapsed_s=1.0, budget_wall_s=None,
        evaluated=1, failed=0, in_flight=0, best_id=None, best_score=None, leaders=leaders,
    )  # fmt: skip


def test_the_board_reads_the_store_only_when_its_top_moved(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(dashboard, "REFRESH_S", 0.0)  # draw at every tick
    statements: list[str] = []
    with Store(default_url(tmp_path)) as store:
        store.create_run(RUN, task_path="t", task_yaml="", seed=0, settings={})
        event.listen(
            store._engine, "before_cursor_execute", lambda *args: statements.append(args[2])
        )
        console = Console(file=io.StringIO(), force_terminal=True, width=120)
        with Dashboard(store, RUN, console) as board:
            board.tick(snapshot(1))
            first = len(statements)
            assert first > 0
            for _ in range(20):
                board.tick(snapshot(1))
            assert len(statements) == first
            board.tick(snapshot(2))
            assert len(statements) > first
