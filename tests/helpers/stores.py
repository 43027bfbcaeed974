"""Stores for the store's tests: opened with their runs, filled with candidates and
evaluations, and read past the store with an engine of their own."""

from __future__ import annotations

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult, StageResult
from evolve.store import CandidateRecord, Settlement, Store

RUN = "run-1"


PASSED = EvalResult.from_stages([StageResult("measure", True, 1.0, metrics={"ns": 10.0})])


def opened(url: str, runs: tuple[str, ...] = (RUN,)) -> Store:
    """The store at `url`, with each of `runs` made if it is not there yet."""
    store = Store(url)
    for run in runs:
        if store.get_run(run) is None:
            store.create_run(run, task_path="t.yaml", task_yaml="seed: 1\n", seed=1, settings={})
    return store


def program(n: int) -> Program:
    """A one-file Python program told apart by `n`."""
    return Program({"a.py": f"# EVOLVE-BLOCK-START\nx = {n}\n# EVOLVE-BLOCK-END\n"})


def new_child(
    store: Store, n: int, parent: CandidateRecord, settlement: Settlement | None = None
) -> CandidateRecord:
    """A child as the engine's admission adds it: known to be new to the run."""
    child = store.add_candidate(
        parent.run_name,
        program(n),
        parent_ids=[parent.id],
        island=0,
        generation=1,
        mutation={"operator": "autotuner"},
        settlement=settlement,
        known_new=True,
    )
    assert child is not None
    return child


def evaluate(store: Store, candidate: CandidateRecord, score: float) -> None:
    """A passed evaluation of `candidate` with `score`, recorded."""
    store.record_evaluation(
        candidate, PASSED, kind="evaluate", score=score, input_seed=1, worker="w",
        started_at=1.0, finished_at=2.0,
    )  # fmt: skip


def raw_engine(url: str) -> Engine:
    """An engine that bypasses the store, to look at what it wrote."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    return create_engine(parsed)


def stored_ids(url: str) -> list[int]:
    """The ids of the candidates the database at `url` holds, read past the store."""
    engine = raw_engine(url)
    with engine.connect() as connection:
        ids = connection.execute(text("SELECT id FROM candidates ORDER BY id")).scalars().all()
    engine.dispose()
    return list(ids)
