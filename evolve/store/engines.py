"""The SQLAlchemy engine for a store's URL, with SQLite's settings.

SQLite is the default. Its file runs in WAL mode so readers (the leaderboard) never block the
writer, and with synchronous=NORMAL a commit survives a killed process without an fsync each.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.pool import ConnectionPoolEntry

from evolve.store.writer_gate import WriterGate, gate_for, install

SQLITE_BUSY_TIMEOUT_MS = 30_000
IMMEDIATE = "BEGIN IMMEDIATE"  # how a writer begins (evolve/store/database.py)
READ_ONLY_SESSION = "-c default_transaction_read_only=on"  # a PostgreSQL session's option


def default_url(results_dir: Path) -> str:
    """The SQLite file a run writes when the user names no database."""
    return URL.create("sqlite", database=str(results_dir / "evolve.db")).render_as_string()


def parse_url(url: str) -> URL:
    """Accept the plain `postgresql://` URL users copy from elsewhere; we ship psycopg 3."""
    parsed = make_url(url)
    if parsed.drivername in ("postgres", "postgresql"):
        return parsed.set(drivername="postgresql+psycopg")
    return parsed


def read_only_url(url: URL) -> list[URL]:
    """The URLs that open `url` read-only, to try in turn. A SQLite file: `mode=ro` (which
    still sees what a live writer commits), then `immutable=1`, for a file whose folder
    cannot hold the -shm and -wal files that WAL mode reads through; a server: as it is
    (make_engine makes its sessions read-only)."""
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return [url]
    path = "file:" + quote(str(Path(url.database).resolve()))
    return [
        url.set(database=path, query={"mode": "ro", "uri": "true"}),
        url.set(database=path, query={"mode": "ro", "immutable": "1", "uri": "true"}),
    ]


def _sqlite_connect(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    _sqlite_settings(dbapi_connection, writes=True)


def _sqlite_read_only(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    _sqlite_settings(dbapi_connection, writes=False)


def _sqlite_settings(dbapi_connection: DBAPIConnection, *, writes: bool) -> None:
    # The driver's own transaction handling skips BEGIN before DDL and SELECT; switch it off
    # and let `_sqlite_begin` emit BEGIN, so a migration is atomic and reads are snapshots.
    dbapi_connection.isolation_level = None  # type: ignore[attr-defined]
    cursor = dbapi_connection.cursor()
    # The busy timeout goes first: turning on WAL needs a lock another process may hold.
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    if writes:  # a reader takes the file's journal mode as it is
        _turn_on_wal(cursor)
        cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
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


def _sqlite_begin(gate: WriterGate | None) -> Callable[[Connection], None]:
    # Writers say BEGIN IMMEDIATE: they take the write lock up front (waiting for it under the
    # busy timeout) instead of failing when a read inside the transaction turns into a write.
    # Within this process they pass the file's gate first (evolve/store/writer_gate.py).
    def begin(connection: Connection) -> None:
        statement = connection.get_execution_options().get("sqlite_begin", "BEGIN")
        if gate is not None and statement == IMMEDIATE:
            gate.enter(connection)
        connection.exec_driver_sql(statement)

    return begin


def _postgres_connect(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    """Floats read back exactly as stored: paging a run's ranking starts after the last
    score read (`Candidates.top`), which must equal its row's. A server older than 12, or
    a role or database set so, sends 15 digits by default, and a rounded score made the
    paging repeat a candidate for ever or skip its ties."""
    cursor = dbapi_connection.cursor()
    cursor.execute("SET extra_float_digits = 3")
    cursor.close()
    dbapi_connection.commit()


def make_engine(url: URL, *, read_only: bool = False) -> Engine:
    """The engine for `url`; `read_only` for a URL of `read_only_url`, whose database then
    refuses every write."""
    backend = url.get_backend_name()
    if backend == "sqlite" and url.database and url.database != ":memory:" and not read_only:
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    if read_only and backend == "postgresql":  # beside the URL's own options (search_path)
        options = " ".join(filter(None, [url.query.get("options"), READ_ONLY_SESSION]))
        url = url.update_query_dict({"options": options})
    engine = create_engine(url)
    if backend == "sqlite":
        event.listen(engine, "connect", _sqlite_read_only if read_only else _sqlite_connect)
        gate = None
        if url.database and url.database != ":memory:" and not read_only:
            gate = gate_for(str(Path(url.database).resolve()), SQLITE_BUSY_TIMEOUT_MS / 1000)
            install(engine, gate)
        event.listen(engine, "begin", _sqlite_begin(gate))
    elif backend == "postgresql":
        event.listen(engine, "connect", _postgres_connect)
    return engine
