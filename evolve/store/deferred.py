"""Writes that wait for the end of a turn (evolve/store/database.py's `Database.turn`).

The engine writes a settled proposal's row, an evaluation's row and its candidate's new
standing for every result, and reads none of them back at once. Inside a turn they wait
for the turn's next read or its commit, and then go out together: each statement once,
with all its rows (an executemany, on the DBAPI's cursor:
evolve/store/cursor_statements.py), and on PostgreSQL all of those in one pipeline
(evolve/store/pipeline.py), which is one round trip for the lot instead of one per row;
at the turn's end, its BEGIN and COMMIT too.

Deferred writes may not depend on one another, except on earlier rows of the same
statement: they are sent grouped by statement, in the order each statement first came.
The one exception is a `referred` row, one that others may name (a new candidate, whose id
the store took ahead: evolve/store/candidate_ids.py). Referred rows go first, at the
turn's end, before any statement SQLAlchemy runs on the turn's connection
(`write_referred`, a listener on the engine), and before a candidate added on the cursor
(`Candidates.add_candidate`), so no row or query ever names or misses one that is not
written yet.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Executable

from evolve.store.pipeline import Batches, send

DEFERRED = "evolve.deferred"  # the open turn's deferred writes, in its connection's info
REFERRED = "evolve.referred"  # those of them that others may refer to, sent first
Pending = dict[Executable, list[dict[str, Any]]]  # rows by statement, in order of arrival


def open_deferring(connection: Connection) -> None:
    """From now on, `defer` on this connection waits for `flush_deferred`."""
    connection.info[DEFERRED], connection.info[REFERRED] = {}, {}


def close_deferring(connection: Connection) -> None:
    """An invalidated connection's info went with it (and may not be read)."""
    if connection.invalidated:
        return
    connection.info.pop(DEFERRED, None)
    connection.info.pop(REFERRED, None)


def deferring(connection: Connection) -> bool:
    """Whether a turn is open on this connection, so that `defer` waits."""
    return DEFERRED in connection.info


def defer(
    connection: Connection,
    statement: Executable,
    values: dict[str, Any],
    *,
    referred: bool = False,
) -> None:
    """Inside a turn the write waits (see above); outside one it is written now."""
    pending: Pending | None = connection.info.get(REFERRED if referred else DEFERRED)
    if pending is None:
        connection.execute(statement, values)
    else:
        pending.setdefault(statement, []).append(values)


def flush_deferred(connection: Connection) -> None:
    send(connection, _all_taken(connection))


def commit_deferred(connection: Connection) -> None:
    """The turn's end: its deferred writes, with the COMMIT where it can go with them in one
    round trip (evolve/store/pipeline.py). SQLAlchemy's commit, which follows, then finds
    the transaction over, and psycopg sends nothing for it."""
    send(connection, _all_taken(connection), commit=True)


def write_referred(connection: Connection, *_: object) -> None:
    """Before SQLAlchemy runs anything on the connection: the referred rows the turn holds,
    which the statement may name (a proposal closed with its new child's id), or read."""
    send(connection, _taken(connection, REFERRED))


def _all_taken(connection: Connection) -> Batches:
    return [*_taken(connection, REFERRED), *_taken(connection, DEFERRED)]


def _taken(connection: Connection, kind: str) -> Batches:
    """The rows waiting, taken out before they are sent: a statement SQLAlchemy runs to
    send them (cursor_statements' fallback) calls `write_referred` again, which must find
    nothing left."""
    pending: Pending | None = connection.info.get(kind)
    if not pending:
        return []
    batches = list(pending.items())
    pending.clear()
    return batches
