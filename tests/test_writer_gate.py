"""Writers of one SQLite file in one process take turns at the file's gate
(evolve/store/writer_gate.py): a writer waits there while another's transaction is open, and
every way a transaction ends opens the gate again."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from evolve.store.engines import IMMEDIATE, make_engine, parse_url
from evolve.store.writer_gate import gate_for


def writer(path: Path) -> Engine:
    engine = make_engine(parse_url(f"sqlite:///{path}")).execution_options(sqlite_begin=IMMEDIATE)
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE IF NOT EXISTS t (n INTEGER)"))
    return engine


def test_a_second_writer_waits_at_the_gate_until_the_first_commits(tmp_path: Path) -> None:
    first, second = writer(tmp_path / "s.db"), writer(tmp_path / "s.db")
    gate = gate_for(str((tmp_path / "s.db").resolve()), 30.0)
    inside, finish, written = threading.Event(), threading.Event(), threading.Event()

    def hold() -> None:
        with first.begin() as connection:
            connection.execute(text("INSERT INTO t VALUES (1)"))
            inside.set()
            finish.wait(10)

    def write() -> None:
        with second.begin() as connection:
            connection.execute(text("INSERT INTO t VALUES (2)"))
        written.set()

    holder = threading.Thread(target=hold)
    holder.start()
    assert inside.wait(10)
    assert gate._lock.locked()
    waiter = threading.Thread(target=write)
    waiter.start()
    assert not written.wait(0.3), "the second writer got in while the first was inside"
    finish.set()
    holder.join(10)
    assert written.wait(10)
    waiter.join(10)
    assert not gate._lock.locked()
    with second.connect() as connection:
        assert sorted(connection.execute(text("SELECT n FROM t")).scalars()) == [1, 2]


def test_a_rolled_back_or_failed_transaction_opens_the_gate(tmp_path: Path) -> None:
    engine = writer(tmp_path / "s.db")
    gate = gate_for(str((tmp_path / "s.db").resolve()), 30.0)
    with pytest.raises(RuntimeError), engine.begin() as connection:
        connection.execute(text("INSERT INTO t VALUES (1)"))
        raise RuntimeError("the caller failed")
    assert not gate._lock.locked()
    connection = engine.connect()
    connection.begin()
    connection.execute(text("INSERT INTO t VALUES (2)"))
    assert gate._lock.locked()
    connection.close()  # back to the pool, rolled back there
    assert not gate._lock.locked()
    with engine.connect() as reader:
        assert list(reader.execute(text("SELECT n FROM t")).scalars()) == []


def test_readers_pass_and_each_file_has_a_gate_of_its_own(tmp_path: Path) -> None:
    engine = writer(tmp_path / "a.db")
    reader = make_engine(parse_url(f"sqlite:///{tmp_path / 'a.db'}"))
    gate = gate_for(str((tmp_path / "a.db").resolve()), 30.0)
    assert gate is not gate_for(str((tmp_path / "b.db").resolve()), 30.0)
    with engine.begin() as connection:
        connection.execute(text("INSERT INTO t VALUES (1)"))
        with reader.connect() as looking:  # a deferred BEGIN does not wait at the gate
            assert list(looking.execute(text("SELECT n FROM t")).scalars()) == []
        assert gate._lock.locked()
    assert not gate._lock.locked()
