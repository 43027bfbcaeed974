"""Writes that wait for the end of a turn (evolve/store/database.py's `Database.turn`).

The engine writes a settled proposal's row, an evaluation's row and its candidate's new
standing for every result, and reads none of them back at once. Inside a turn they wait
for the turn's next read or its commit, and then go out together: each statement once,
with all its rows (an executemany, on the DBAPI's cursor:
evolve/store/cursor_statements.py), and on PostgreSQL all of those in one pipeline, which
is one round trip for the lot instead of one per row.

Deferred writes may not depend on one another, except on earlier rows of the same
statement: they are sent grouped by statement, in the order each statement first came.
Rows they refer to (a candidate) are written at once, never deferred.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Executable
from sqlalchemy.exc import DBAPIError

from evolve.store.cursor_statements import execute_many

DEFERRED = "evolve.deferred"  # the open turn's deferred writes, in its connection's info


def open_deferring(connection: Connection) -> None:
    """From now on, `defer` on this connection waits for `flush_deferred`."""
    connection.info[DEFERRED] = {}


def close_deferring(connection: Connection) -> None:
    connection.info.pop(DEFERRED, None)


def defer(connection: Connection, statement: Executable, values: dict[str, Any]) -> None:
    """Inside a turn the write waits (see above); outside one it is written now."""
    pending: dict[Executable, list[dict[str, Any]]] | None = connection.info.get(DEFERRED)
    if pending is None:
        connection.execute(statement, values)
    else:
        pending.setdefault(statement, []).append(values)


def flush_deferred(connection: Connection) -> None:
    pending: dict[Executable, list[dict[str, Any]]] | None = connection.info.get(DEFERRED)
    if not pending:
        return
    with _pipelined(connection):
        for statement, rows in pending.items():
            execute_many(connection, statement, rows)
    pending.clear()


@contextmanager
def _pipelined(connection: Connection) -> Iterator[None]:
    """psycopg's pipeline mode where the driver is psycopg: the statements are sent without
    waiting for each answer, and the answers are read once, at the end. An error in one
    of them surfaces there, as the DBAPI's error; it is raised as SQLAlchemy's own, as an
    error from `execute` would be."""
    dbapi = connection.dialect.loaded_dbapi
    if connection.dialect.driver != "psycopg" or not dbapi.Pipeline.is_supported():
        yield  # a libpq older than 14 has no pipeline mode: one round trip per statement
        return
    try:
        with connection.connection.driver_connection.pipeline():  # type: ignore[union-attr]
            yield
    except dbapi.Error as error:
        raise DBAPIError.instance(None, None, error, dbapi.Error) from error
