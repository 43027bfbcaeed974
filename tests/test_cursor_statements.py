"""The store's hot writes on the DBAPI cursor (evolve/store/cursor_statements.py) must write
exactly what SQLAlchemy's `Connection.execute` writes, fail as it fails, and hand back to
it every statement they cannot run as it would; on SQLite and on PostgreSQL."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from sqlalchemy import JSON, Column, Integer, MetaData, String, Table, bindparam, insert, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, StatementError

from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult, StageResult
from evolve.store import Opening, Settlement, Store, cursor_statements, default_url
from evolve.store.cursor_statements import execute_many, execute_one, prepare
from evolve.store.schema import Base
from tests.conftest import postgres_schema

RUN = "run-1"


def program(x: int) -> Program:
    return Program({"a.py": f"# EVOLVE-BLOCK-START\nx = {x}\n# EVOLVE-BLOCK-END\n"})


PASSED = EvalResult.from_stages([StageResult("check", True, 0.5, metrics={"ns": 10.0})])
FAILED = EvalResult.from_stages([StageResult("check", False, 0.1, feedback="wrong answer")])

METADATA = MetaData()
THINGS = Table(
    "things",
    METADATA,
    Column("id", Integer, primary_key=True),
    Column("name", String(32), unique=True, nullable=False),
    Column("tags", JSON),
    Column("weight", Integer, nullable=False, default=7),
    Column("stamp", Integer, default=lambda: 42),  # computed per row by SQLAlchemy
)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@contextmanager
def database(backend: str, folder: Path) -> Iterator[str]:
    """A fresh, empty database's URL."""
    if backend == "sqlite":
        yield default_url(folder)
        return
    with postgres_schema() as url:
        yield url


def engine_of(url: str) -> sqlalchemy.Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    return sqlalchemy.create_engine(parsed)


@pytest.fixture
def things(backend: str, tmp_path: Path) -> Iterator[sqlalchemy.Engine]:
    with database(backend, tmp_path) as url:
        engine = engine_of(url)
        METADATA.create_all(engine)
        yield engine
        engine.dispose()


def a_run_written(url: str) -> dict[str, list[dict[str, Any]]]:
    """What a run's usual writes leave in the store: candidates added (two settling a
    driver-made proposal, the second known to be new, and a duplicate), evaluations that
    pass and fail recorded inside turns, proposals settled with and without a child; every
    row, less ids and times."""
    with Store(url) as store:
        store.create_run(RUN, task_path="task.yaml", task_yaml="seed: 1\n", seed=1, settings={})
        seed = store.plant_seed(RUN, program(1))
        opening = Opening(RUN, "autotuner", (seed.id,), 0)
        with store.turn():
            store.record_evaluation(
                seed, PASSED, kind="evaluate", score=-3.5, input_seed=1, worker="w",
                started_at=1.0, finished_at=2.0,
            )  # fmt: skip
            children = [
                store.add_candidate(
                    RUN,
                    program(n),
                    parent_ids=[seed.id],
                    island=n % 2,
                    generation=1,
                    mutation={"operator": "autotuner", "summary": f"x: 1 -> {n}"},
                    settlement=Settlement(opening, "candidate", summary=f"x: 1 -> {n}"),
                    known_new=n == 3,  # on PostgreSQL: its id taken ahead, its row deferred
                )
                for n in (2, 3)
            ]
            again = store.add_candidate(
                RUN, program(2), parent_ids=[seed.id], island=0, generation=1, mutation={}
            )
            assert again is None
            store.settle_proposal(Settlement(opening, "duplicate", detail="the same as #2"))
        with store.turn():
            for child, result, score in zip(children, (PASSED, FAILED), (-1.0, None), strict=True):
                assert child is not None
                store.record_evaluation(
                    child, result, kind="evaluate", score=score, input_seed=2, worker="w",
                    started_at=3.0, finished_at=4.0,
                )  # fmt: skip
            store.record_evaluation(
                seed, PASSED, kind="remeasure", score=-4.0, input_seed=3, worker="w",
                started_at=5.0, finished_at=6.0,
            )  # fmt: skip
    engine = engine_of(url)
    written: dict[str, list[dict[str, Any]]] = {}
    with engine.connect() as connection:
        for table in ("candidates", "evaluations", "proposals"):
            stored = Base.metadata.tables[table]  # read as typed: JSON decoded on both backends
            rows = connection.execute(select(stored).order_by(stored.c.id))
            written[table] = [
                {
                    key: value
                    for key, value in row.items()
                    if key != "id" and not key.endswith("_at")
                }
                for row in rows.mappings()
            ]
    engine.dispose()
    return written


def test_a_run_writes_on_the_cursor_what_it_writes_through_sqlalchemy(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[str] = []
    on_cursor = cursor_statements._cursor

    def noted(
        connection: sqlalchemy.Connection, sql: str, parameters: object, given: Any = None
    ) -> Any:
        sent.append(sql.split()[0].upper())
        return on_cursor(connection, sql, parameters, given)

    monkeypatch.setattr(cursor_statements, "_cursor", noted)
    with database(backend, tmp_path / "cursor") as url:
        fast = a_run_written(url)
    assert sent.count("INSERT") >= 6 and "UPDATE" in sent  # the writes did go on the cursor
    monkeypatch.setattr(cursor_statements, "prepare", lambda *args: None)
    sent.clear()
    with database(backend, tmp_path / "sqlalchemy") as url:
        slow = a_run_written(url)
    assert sent == []
    assert fast == slow
    assert [row["status"] for row in fast["candidates"]] == ["ok", "ok", "check_failed"]
    assert [row["score"] for row in fast["candidates"]] == [-4.0, -1.0, None]
    assert [row["measurements"] for row in fast["candidates"]] == [2, 1, 0]
    assert [row["outcome"] for row in fast["proposals"]] == ["candidate", "candidate", "duplicate"]
    assert fast["proposals"][0]["calls"] == 0 and fast["proposals"][2]["detail"] == "the same as #2"
    assert fast["evaluations"][1]["metrics"] == {"ns": 10.0}


def test_values_the_statement_leaves_out_take_the_columns_constant_defaults(
    things: sqlalchemy.Engine,
) -> None:
    with things.begin() as connection:
        execute_many(connection, insert(THINGS), [{"name": "a", "tags": ["x", 1]}])
        execute_many(connection, insert(THINGS), [{"name": "b", "tags": None, "weight": 3}])
        rows = connection.execute(select(THINGS).order_by(THINGS.c.id)).all()
    assert [(row.name, row.tags, row.weight, row.stamp) for row in rows] == [
        ("a", ["x", 1], 7, 42),
        ("b", None, 3, 42),
    ]


def test_a_computed_default_is_left_to_sqlalchemy(things: sqlalchemy.Engine) -> None:
    statement = insert(THINGS)
    assert prepare(things.dialect, statement, frozenset({"name", "stamp"})) is not None
    assert prepare(things.dialect, statement, frozenset({"name"})) is None


def test_returning_gives_the_new_row_and_nothing_on_a_conflict(things: sqlalchemy.Engine) -> None:
    if things.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    else:
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    adding = (
        dialect_insert(THINGS)
        .on_conflict_do_nothing(index_elements=["name"])
        .returning(THINGS.c.id, THINGS.c.weight)
    )
    with things.begin() as connection:
        first = execute_one(connection, adding, {"name": "a", "tags": {"k": [1]}, "stamp": 1})
        second = execute_one(connection, adding, {"name": "b", "tags": {}, "stamp": 1})
        again = execute_one(connection, adding, {"name": "a", "tags": {}, "stamp": 1})
    assert first is not None and second is not None
    assert first[1] == 7 and second[0] > first[0]
    assert again is None


def test_a_database_error_is_sqlalchemys_and_the_transaction_rolls_back(
    things: sqlalchemy.Engine,
) -> None:
    with pytest.raises(IntegrityError) as raised, things.begin() as connection:
        execute_many(connection, insert(THINGS), [{"name": "a", "stamp": 1}])
        execute_many(connection, insert(THINGS), [{"name": "a", "stamp": 2}])
    assert "INSERT INTO things" in str(raised.value)
    with things.connect() as connection:
        assert connection.execute(select(THINGS)).all() == []


def test_a_value_its_type_refuses_fails_as_through_sqlalchemy(things: sqlalchemy.Engine) -> None:
    row = {"name": "a", "tags": {"not json": {1, 2}}, "stamp": 1}
    failures = []
    for write in (execute_many, lambda c, s, r: c.execute(s, r)):
        with pytest.raises(Exception) as raised, things.begin() as connection:
            write(connection, insert(THINGS), [row])
        failures.append(type(raised.value))
    assert failures[0] is failures[1]
    with things.connect() as connection:
        assert connection.execute(select(THINGS)).all() == []


def test_a_value_left_out_that_the_statement_needs_is_refused_as_sqlalchemy_refuses_it(
    things: sqlalchemy.Engine,
) -> None:
    renaming = THINGS.update().where(THINGS.c.id == bindparam("which")).values(name="b")
    with things.begin() as connection:
        execute_many(connection, insert(THINGS), [{"name": "a", "stamp": 1}])
        with pytest.raises(StatementError, match="which"):
            execute_many(connection, renaming, [{}])
    assert prepare(things.dialect, renaming, frozenset()) is None


def test_rows_that_name_different_values_are_written_as_sqlalchemy_writes_them(
    things: sqlalchemy.Engine,
) -> None:
    rows = [{"name": "a", "stamp": 1}, {"name": "b", "stamp": 2, "weight": 5}]
    outcomes = []
    for run in range(2):
        write = execute_many if run == 0 else lambda c, s, r: c.execute(s, r)
        try:
            with things.begin() as connection:
                write(
                    connection,
                    insert(THINGS),
                    [{**row, "name": f"{run}{row['name']}"} for row in rows],
                )
                written = connection.execute(
                    select(THINGS.c.weight).where(THINGS.c.name.like(f"{run}%"))
                ).all()
            outcomes.append(sorted(weight for (weight,) in written))
        except StatementError as error:
            outcomes.append(type(error).__name__)
    assert outcomes[0] == outcomes[1]


def test_an_expanding_parameter_is_left_to_sqlalchemy(things: sqlalchemy.Engine) -> None:
    reading = select(THINGS.c.name).where(THINGS.c.name.in_(bindparam("names", expanding=True)))
    with things.begin() as connection:
        execute_many(connection, insert(THINGS), [{"name": n, "stamp": 1} for n in "abc"])
        assert prepare(connection.dialect, reading, frozenset({"names"})) is None
        found = execute_one(connection, reading, {"names": ["b", "c"]})
    assert found is not None and found[0] in ("b", "c")


def test_each_dialect_and_set_of_names_is_compiled_once(things: sqlalchemy.Engine) -> None:
    statement = insert(THINGS)
    before = prepare.cache_info()
    with things.begin() as connection:
        for n in itertools.islice(itertools.count(), 5):
            execute_many(connection, statement, [{"name": f"n{n}", "stamp": n}])
    after = prepare.cache_info()
    assert after.misses - before.misses == 1 and after.hits - before.hits == 4
