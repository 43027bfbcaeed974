"""The writers of one SQLite file inside one process take turns at a lock of their own
before they ask SQLite for the file.

SQLite takes one writer at a time: a BEGIN IMMEDIATE that finds another writer in the file
waits in SQLite's busy handler, which sleeps and looks again (after 1, 2, 5, 10, 15, 20, 25
ms and on), not when the file is free. In a run on one machine the engine's turns and the
ledger writer (evolve/propose/ledger_writer.py) are threads of one process, and a model call's
reservation, which the request waits for, is one of those writes: a writer that waited
would sleep many times as long as the other's commit takes. Behind this gate a waiting
writer wakes when the other one ends its transaction.

The gate only orders writers within the process; SQLite's lock still guards the file, against
other processes too. A transaction ends, for the gate, at its commit or rollback, or when its
connection goes back to the pool, whichever comes first; a writer that cannot pass the gate
within the busy timeout goes on to SQLite's own lock.
"""

from __future__ import annotations

import threading

from sqlalchemy import Connection, Engine, event
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.pool import ConnectionPoolEntry

_gates: dict[str, WriterGate] = {}
_gates_lock = threading.Lock()


class WriterGate:
    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._holder: int | None = None  # id() of the DBAPI connection that passed
        self._guard = threading.Lock()  # over _holder

    def enter(self, connection: Connection) -> None:
        """Before the connection's BEGIN IMMEDIATE."""
        passed = self._lock.acquire(timeout=self.timeout_s)
        if passed:
            with self._guard:
                self._holder = id(connection.connection.dbapi_connection)

    def leave(self, dbapi_connection: DBAPIConnection | None) -> None:
        """The connection's transaction ended; the gate opens if it was the one inside."""
        with self._guard:
            if dbapi_connection is None or self._holder != id(dbapi_connection):
                return
            self._holder = None
        self._lock.release()


def gate_for(database: str, timeout_s: float) -> WriterGate:
    """The process's gate for the SQLite file at `database`."""
    with _gates_lock:
        return _gates.setdefault(database, WriterGate(timeout_s))


def install(engine: Engine, gate: WriterGate) -> None:
    """Close the gate behind each of the engine's writers at the end of its transaction."""

    def ended(connection: Connection) -> None:
        gate.leave(connection.connection.dbapi_connection)

    def returned(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
        gate.leave(dbapi_connection)

    event.listen(engine, "commit", ended)
    event.listen(engine, "rollback", ended)
    event.listen(engine.pool, "checkin", returned)
