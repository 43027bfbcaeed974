"""The store's connections: opening the database at its schema's version, and handing the
store's parts a connection for each read and write, inside a turn (`Database.turn`) or in
a transaction of their own. The engine itself, and SQLite's settings, are
evolve/store/engines.py's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from types import TracebackType
from typing import Any, Self, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Row,
    Select,
    event,
    inspect,
    text,
)
from sqlalchemy.engine import URL
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from evolve.store.commits import Commits
from evolve.store.deferred import (
    close_deferring,
    commit_deferred,
    flush_deferred,
    open_deferring,
    write_referred,
)
from evolve.store.engines import IMMEDIATE, make_engine, parse_url, read_only_url
from evolve.store.new_schema import create_if_new

# The newest revision in migrations/versions (tests/test_store.py checks that it is). A
# database already there, or a new one (evolve/store/new_schema.py), is opened without
# loading Alembic (evolve/store/upgrade.py).
SCHEMA_HEAD = "0005_charges"
PAGE_ROWS = 1_000  # rows per read when a whole run is read in pages (`Database._pages`)
T = TypeVar("T")


def _end_turn(connection: Connection, *, commit: bool) -> None:
    """A turn's end on a server: its deferred writes and COMMIT, or (not `commit`) a
    rollback as the connection goes back to the pool."""
    try:
        if commit:
            commit_deferred(connection)
            connection.commit()
    finally:
        close_deferring(connection)
        connection.close()


def _stored_revision(connection: Connection) -> str | None:
    """The revision Alembic last wrote, None in a new database. `has_table` looks where an
    unqualified name resolves (PostgreSQL's search_path), as Alembic does."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


class StoreNotReadable(RuntimeError):
    """A store opened read-only that cannot be read as it is: behind this evolve's schema."""


def _readable(url: URL) -> Engine:
    """A read-only engine on `url` whose schema is this evolve's. A SQLite file in WAL mode
    needs its -shm and -wal files beside it, which a folder no one may write to cannot
    hold: then, with no writer possible, the file is read as immutable."""
    for attempt in read_only_url(url):
        engine = make_engine(attempt, read_only=True)
        try:
            with engine.connect() as connection:
                revision = _stored_revision(connection)
        except OperationalError:
            engine.dispose()
            if attempt.get_backend_name() != "sqlite":
                raise
            continue
        if revision != SCHEMA_HEAD:
            engine.dispose()
            raise StoreNotReadable(
                f"the store at {url.render_as_string()} is at schema {revision or 'none'}, "
                f"not {SCHEMA_HEAD}: a command that writes (`evolve run --resume`) upgrades it"
            )
        return engine
    raise StoreNotReadable(f"cannot open {url.render_as_string()} for reading")


class Database:
    """Opens (and if needed creates or upgrades) the database at `url`, and hands the rest of
    the store sessions for reads and for writes. Each part of the store keeps every public
    write to one short transaction of its own, unless the caller has opened a `turn`.

    `read_only` opens it for the commands that only look: nothing is created, upgraded or
    written (the database refuses writes: a SQLite file is opened `mode=ro`, a PostgreSQL
    session is read-only), so it works on a copy no one may write to."""

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        self._url = parse_url(url)
        self.read_only = read_only
        if read_only:
            self._engine = _readable(self._url)
            self._writer, self._commits, self._turn = self._engine, None, None
            self._readers: sessionmaker[Session] = sessionmaker(
                self._engine, expire_on_commit=False
            )
            self._writers = self._readers
            return
        self._engine = make_engine(self._url)
        # On a server, turns commit on a thread of their own (evolve/store/commits.py); on
        # SQLite, in the process, that would cost more than it saves. (The listener goes on
        # before the engine's variant below is made, which copies its listeners as they are.)
        self._commits: Commits | None = None
        if self._url.get_backend_name() != "sqlite":
            event.listen(self._engine, "before_cursor_execute", self._before_statement)
            self._commits = Commits()
        self._writer = self._engine.execution_options(sqlite_begin=IMMEDIATE)
        self._readers = sessionmaker(self._engine, expire_on_commit=False)
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
        nothing else (on a server, also the turn before if its commit had not reached the
        server), and `--resume` redoes it. Other threads (the lease's heartbeat) keep their
        own transactions. On a server the commit goes on while the caller does (see
        evolve/store/commits.py for what that changes, and what it does not)."""
        if self._turn is not None:
            raise RuntimeError("a store turn is already open")
        if self._commits is None:
            with self._writer.begin() as connection:
                try:
                    with self._turn_on(connection):
                        yield
                    commit_deferred(connection)
                finally:
                    close_deferring(connection)
            return
        connection = self._writer.connect()
        try:
            connection.begin()
            with self._turn_on(connection):
                yield
            # One turn in flight at most: turns that ended while a slow commit held them up
            # would each hold a connection until the pool ran out.
            self._commits.wait()
        except BaseException:
            _end_turn(connection, commit=False)
            raise
        self._commits.hand_over(partial(_end_turn, connection, commit=True))

    @contextmanager
    def _turn_on(self, connection: Connection) -> Iterator[None]:
        self._turn = (threading.get_ident(), connection)
        open_deferring(connection)
        try:
            yield
        finally:
            self._turn = None

    def wait_for_commits(self) -> None:
        """Once the turns this thread ended are committed: before another process is sent
        work that must find their rows (evolve/store/commits.py)."""
        if self._commits is not None:
            self._commits.wait()

    def _before_statement(self, connection: Connection, *_: object) -> None:
        """Before any statement SQLAlchemy runs on a server (a listener): the turns in
        flight first, then the open turn's referred rows (evolve/store/deferred.py)."""
        self.wait_for_commits()
        write_referred(connection)

    def _flush(self, connection: Connection, *, everything: bool = True) -> None:
        """Before a statement on the turn's cursor, past the listener: what it may read or
        name is written first: the turns in flight, and the open turn's deferred writes
        (`everything`) or its referred rows only."""
        self.wait_for_commits()
        if everything:
            flush_deferred(connection)
        else:
            write_referred(connection)

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
                self._flush(turn[1])
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
        self._flush(turn[1])
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
        try:
            if self._commits is not None:
                self._commits.close()
        finally:
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
