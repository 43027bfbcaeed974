"""Sending a batch of writes in one go: with psycopg, in its pipeline mode, one round trip
for all of them; elsewhere (SQLite, in the process) one statement after another.

At a turn's end the COMMIT goes in the same pipeline, and so does the BEGIN when the turn
has sent nothing before, which is the engine's usual turn. psycopg on its own would wait
for each of those alone: it syncs after the BEGIN it sends in a pipeline, and a commit in
one takes a sync of its own. For that BEGIN the connection is in autocommit while the
pipeline lasts, so that psycopg sends none of its own; the explicit BEGIN ... COMMIT
keeps the batch one transaction. A turn's writes then cost one round trip, and one
cursor for all its statements, where psycopg's own BEGIN and commit and a cursor per
statement would cost more of the driver's CPU and more waiting.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Executable

from evolve.store.cursor_statements import execute_many, raise_as_sqlalchemy

log = logging.getLogger(__name__)

Batches = Sequence[tuple[Executable, Sequence[Mapping[str, Any]]]]


def send(connection: Connection, batches: Batches, *, commit: bool = False) -> None:
    """Each statement with all its rows, in order. `commit`: the transaction ends with them
    where it can (psycopg); elsewhere the caller's commit, which follows, ends it."""
    if not batches:
        return
    with _pipeline(connection, opening=commit) as cursor:
        for statement, rows in batches:
            execute_many(connection, statement, rows, cursor=cursor)
        if commit and cursor is not None:
            cursor.execute("COMMIT", prepare=False)


@contextmanager
def _pipeline(connection: Connection, *, opening: bool) -> Iterator[Any]:
    """A cursor of psycopg's in pipeline mode, None where there is none (not psycopg, or a
    libpq older than 14: one round trip per statement). `opening`: if no transaction is
    open yet, its BEGIN goes in the pipeline too (see above). An error in any statement
    surfaces as the pipeline ends; it is raised as SQLAlchemy's own, as an error from
    `execute` would be, and the transaction is rolled back (here, if its BEGIN was ours;
    by the caller otherwise)."""
    dbapi = connection.dialect.loaded_dbapi
    if connection.dialect.driver != "psycopg" or not dbapi.Pipeline.is_supported():
        yield None
        return
    driver: Any = connection.connection.driver_connection
    begin = opening and driver.info.transaction_status == dbapi.pq.TransactionStatus.IDLE
    try:
        if begin:
            driver.autocommit = True
        with driver.pipeline(), driver.cursor() as cursor:
            if begin:
                cursor.execute("BEGIN", prepare=False)
            yield cursor
    except Exception as error:
        raise_as_sqlalchemy(connection, error, None, None)
    finally:
        if begin:
            _leave_autocommit(connection, driver, dbapi)


def _leave_autocommit(connection: Connection, driver: Any, dbapi: Any) -> None:
    """Back to psycopg's own transactions. A batch that failed left its explicit
    transaction aborted: it is rolled back first, since autocommit may only change
    between transactions. A connection that cannot be brought back (it broke, or an
    interrupt came first) is invalidated: the pool discards it rather than hand it out
    in autocommit, where a turn would no longer be one transaction."""
    if connection.invalidated:
        return
    try:
        if driver.info.transaction_status != dbapi.pq.TransactionStatus.IDLE:
            driver.rollback()
        driver.autocommit = False
    except dbapi.Error:
        log.warning("a batch's connection could not leave autocommit", exc_info=True)
        connection.invalidate()
    except BaseException:
        connection.invalidate()
        raise
