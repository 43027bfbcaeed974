"""Opening the database: the URL, the engine, SQLite's settings, and the schema's version.

SQLite is the default. Its file runs in WAL mode so readers (the leaderboard) never block the
writer, and with synchronous=NORMAL a commit survives a killed process without an fsync each.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Row,
    Select,
    create_engine,
    event,
    inspect,
    text,
)
from sqlalchemy.engine import URL, make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry

from evolve.store.deferred import (
    close_deferring,
    commit_deferred,
    flush_deferred,
    open_deferring,
    write_referred,
)
from evolve.store.new_schema import create_if_new

# The newest revision in migrations/versions (tests/test_store.py checks that it is). A
# database already there, or a new one (evolve/store/new_schema.py), is opened without
# loading Alembic (evolve/store/upgrade.py).
SCHEMA_HEAD = "0004_proposals"
SQLITE_BUSY_TIMEOUT_MS = 30_000
PAGE_ROWS = 1_000  # rows per read when a whole run is read in pages (`Database._pages`)
T = TypeVar("T")


def default_url(results_dir: Path) -> str:
    """The SQLite file a run writes when the user names no database."""
    return URL.create("sqlite", database=str(results_dir / "evolve.db")).render_as_string()


def _parse(url: str) -> URL:
    """Accept the plain `postgresql://` URL users copy from elsewhere; we ship psycopg 3."""
    parsed = make_url(url)
    if parsed.drivername in ("postgres", "postgresql"):
        return parsed.set(drivername="postgresql+psycopg")
    return parsed


def _sqlite_connect(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    # The driver's own transaction handling skips BEGIN before DDL and SELECT; switch it off
    # and let `_sqlite_begin` emit BEGIN, so a migration is atomic and reads are snapshots.
    dbapi_connection.isolation_level = None  # type: ignore[attr-defined]
    cursor = dbapi_connection.cursor()
    # The busy timeout goes first: turning on WAL needs a lock another process may hold.
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    _turn_on_wal(cursor)
    for pragma in ("synchronous=NORMAL", "foreign_keys=ON"):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def _turn_on_wal(cursor: sqlite3.Cursor) -> None:
    """Two processes opening one new file at once: SQLite's busy handler does not cover the
    switch to WAL, which failed "database is locked" for one of them in a fifth to a half
    of tries. It is tried again until the busy timeout."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _sqlite_begin(connection: Connection) -> None:
    # Writers say BEGIN IMMEDIATE: they take the write lock up front (waiting for it under the
    # busy timeout) instead of failing when a read inside the transaction turns into a write.
    connection.exec_driver_sql(connection.get_execution_options().get("sqlite_begin", "BEGIN"))


def _engine(url: URL) -> Engine:
    if url.get_backend_name() != "sqlite":
        engine = create_engine(url)
        # A turn's new candidates wait with its other writes (evolve/store/candidate_ids.py).
        event.listen(engine, "before_cursor_execute", write_referred)
        return engine
    if url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url)
    event.listen(engine, "connect", _sqlite_connect)
    event.listen(engine, "begin", _sqlite_begin)
    return engine


def _stored_revision(connection: Connection) -> str | None:
    """The revision Alembic last wrote, None in a new database. `has_table` looks where an
    unqualified name resolves (PostgreSQL's search_path), as Alembic does."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


class Database:
    """Opens (and if needed creates or upgrades) the database at `url`, and hands the rest of
    the store sessions for reads and for writes. Each part of the store keeps every public
    write to one short transaction of its own, unless the caller has opened a `turn`."""

    def __init__(self, url: str) -> None:
        self._url = _parse(url)
        self._engine = _engine(self._url)
        self._writer = self._engine.execution_options(sqlite_begin="BEGIN IMMEDIATE")
        self._readers: sessionmaker[Session] = sessionmaker(self._engine, expire_on_commit=False)
        self._writers: sessionmaker[Session] = sessionmaker(self._writer, expire_on_commit=False)
        # The connection of the open turn and the thread that opened it (see `turn`).
        self._turn: tuple[int, Connection] | None = None
        with self._engine.begin() as connection:
            current = _stored_revision(connection) == SCHEMA_HEAD
        if not current and not create_if_new(self._writer, SCHEMA_HEAD):
            # Alembic loads only for a database that is behind: 0.2 s and 12 MB that
            # every other process opening the store is spared.
            from evolve.store.upgrade import upgrade_to_head

            upgrade_to_head(self._writer)

    @contextmanager
    def turn(self) -> Iterator[None]:
        """Every write (and read) this thread makes inside is one transaction, committed at
        the end: the engine writes all the results that reached it together at once, which
        costs one commit instead of one per write. A crash inside loses the whole turn and
        nothing else, and `--resume` redoes it. Other threads (the lease's heartbeat) keep
        their own transactions."""
        if self._turn is not None:
            raise RuntimeError("a store turn is already open")
        with self._writer.begin() as connection:
            self._turn = (threading.get_ident(), connection)
            open_deferring(connection)
            try:
                yield
                commit_deferred(connection)
            finally:
                self._turn = None
                close_deferring(connection)

    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        """A connection in a write transaction: the open turn's, or one of its own that
        commits when the block ends."""
        turn = self._turn
        if turn is not None and turn[0] == threading.get_ident():
            yield turn[1]
            return
        with self._writer.begin() as connection:
            yield connection

    @contextmanager
    def _reading(self, flush: bool = True) -> Iterator[Connection]:
        """A connection for reads: the open turn's, which sees the turn's writes (its
        deferred ones too, unless not `flush`), or one of its own."""
        turn = self._turn
        if turn is not None and turn[0] == threading.get_ident():
            if flush:
                flush_deferred(turn[1])
            yield turn[1]
            return
        with self._engine.connect() as connection:
            yield connection

    def _read(self) -> Session:
        return self._session(self._readers)

    def _write(self) -> Session:
        return self._session(self._writers)

    def _session(self, factory: Callable[[], Session]) -> Session:
        """A session of its own, or inside this thread's open turn one on the turn's
        connection, which sees the turn's writes and never commits or closes it."""
        turn = self._turn
        if turn is None or turn[0] != threading.get_ident():
            return factory()
        flush_deferred(turn[1])
        return Session(bind=turn[1], expire_on_commit=False, join_transaction_mode="rollback_only")

    def _pages(
        self, query: Select[Any], key: ColumnElement[int], convert: Callable[[Row[Any]], T]
    ) -> Iterator[T]:
        """The rows of `query` in `key` order, read PAGE_ROWS at a time, each page in a short
        read of its own: a reader of a whole run (an export) holds one page in memory, and
        no transaction stays open while it writes the page out. The key must be unique."""
        after: int | None = None
        while True:
            page = query.order_by(key).limit(PAGE_ROWS)
            if after is not None:
                page = page.where(key > after)
            with self._reading() as connection:
                rows = connection.execute(page).all()
            yield from (convert(row) for row in rows)
            if len(rows) < PAGE_ROWS:
                return
            after = rows[-1]._mapping[key]

    @property
    def one_writer_at_a_time(self) -> bool:
        """SQLite: a writer takes the whole database at BEGIN IMMEDIATE, so two writers
        never wait on each other's rows and never deadlock. PostgreSQL locks rows, as
        they are written."""
        return self._url.get_backend_name() == "sqlite"

    @property
    def display_url(self) -> str:
        """The URL with any password masked, fit for terminals and logs."""
        return self._url.render_as_string(hide_password=True)

    @property
    def url(self) -> str:
        """The full URL, password included: for opening the same store elsewhere, never
        for printing."""
        return self._url.render_as_string(hide_password=False)

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
