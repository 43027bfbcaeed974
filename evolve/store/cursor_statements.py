"""The engine's hottest writes, run straight on the DBAPI cursor with their SQL compiled once.

Per candidate the engine adds the candidate, and at each turn's end writes the turn's
evaluations, standings and settled proposals (evolve/store/deferred.py). Through
`Connection.execute`, SQLAlchemy's work around each execution (finding the compiled form,
processing every value, firing events, building a result) costs the driver a few times
what the database takes to run the statement; here a statement costs about what the
database's own work does (`bench/overhead.py` shows the driver's CPU per candidate).

A statement is compiled once per dialect and set of value names, by SQLAlchemy, in the
dialect's own SQL and parameter style. Each execution then does what SQLAlchemy's would
for these statements and no more: it adds the values the statement binds itself and the
columns' constant defaults, passes each value through the type's own bind processor
(JSON, casts), and hands the lot to the cursor.

A statement this cannot run as SQLAlchemy would (a column default that is computed, an
expanding or literal-rendered parameter, a value left out that the statement requires,
rows that name different values) goes through `Connection.execute` instead, with its
errors. What is given up: Connection events (`before_cursor_execute`) do not fire for the
statements run here. A database error is raised as SQLAlchemy's own (`IntegrityError`,
...), as `execute` raises it, and the caller's transaction is rolled back as `execute`
would leave it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NoReturn

from sqlalchemy import Connection, Dialect, Executable
from sqlalchemy.exc import DBAPIError, StatementError
from sqlalchemy.sql.compiler import SQLCompiler

Parameters = Sequence[Any] | dict[str, Any]


@dataclass(frozen=True)
class Prepared:
    sql: str
    order: tuple[str, ...] | None  # a positional style's value names in the SQL's order
    fixed: dict[str, Any]  # bound by the statement, or a column's default a row leaves out
    processors: dict[str, Callable[[Any], Any]]  # by value name, where the type has one

    def parameters(self, values: Mapping[str, Any]) -> Parameters:
        merged = {**self.fixed, **values}
        for name, process in self.processors.items():
            merged[name] = process(merged[name])
        return merged if self.order is None else [merged[name] for name in self.order]


@lru_cache(maxsize=128)
def prepare(dialect: Dialect, statement: Executable, names: frozenset[str]) -> Prepared | None:
    """The statement compiled for values under `names`; None where it needs more of
    SQLAlchemy than this module does (see above)."""
    compiled = statement.compile(dialect=dialect, column_keys=sorted(names))
    if (
        not isinstance(compiled, SQLCompiler)
        or compiled.escaped_bind_names
        or compiled.literal_execute_params
        or compiled.post_compile_params
    ):
        return None
    fixed: dict[str, Any] = {}
    for column, default in [
        *((column, column.default) for column in compiled.insert_prefetch),
        *((column, column.onupdate) for column in compiled.update_prefetch),
    ]:
        if default is None or not default.is_scalar:
            return None  # computed per row by SQLAlchemy
        fixed[column.key] = default.arg  # type: ignore[attr-defined]
    processors: dict[str, Callable[[Any], Any]] = {}
    for bind, name in compiled.bind_names.items():
        if bind.callable is not None or bind.expanding:
            return None
        if name not in names and name not in fixed:
            if bind.required:
                return None  # SQLAlchemy says which value is missing
            fixed[name] = bind.value
        process = bind.type.dialect_impl(dialect).bind_processor(dialect)
        if process is not None:
            processors[name] = process
    order = tuple(compiled.positiontup) if compiled.positiontup is not None else None
    return Prepared(compiled.string, order, fixed, processors)


def _prepared(
    connection: Connection, statement: Executable, rows: Sequence[Mapping[str, Any]]
) -> Prepared | None:
    first = rows[0].keys()
    if any(row.keys() != first for row in rows):
        return None  # SQLAlchemy's executemany compiles for the first row's names
    return prepare(connection.dialect, statement, frozenset(first))


def execute_many(
    connection: Connection,
    statement: Executable,
    rows: Sequence[Mapping[str, Any]],
    *,
    cursor: Any = None,
) -> None:
    """The statement once per row, in one `executemany`; rows it returns are not read. On
    `cursor` if given (a pipeline's: evolve/store/pipeline.py), whose owner raises its
    errors; on a cursor of its own otherwise."""
    if not rows:
        return
    prepared = _prepared(connection, statement, rows)
    if prepared is None:
        connection.execute(statement, list(rows))
        return
    parameters = _processed(prepared, rows)
    with _cursor(connection, prepared.sql, parameters, cursor) as on:
        on.executemany(prepared.sql, parameters)


def execute_one(
    connection: Connection, statement: Executable, values: Mapping[str, Any]
) -> Sequence[Any] | None:
    """The first row the statement returned (RETURNING), as the DBAPI gives it, without
    SQLAlchemy's result processing (right for keys and plain numbers); None if none."""
    prepared = _prepared(connection, statement, [values])
    if prepared is None:
        return connection.execute(statement, values).first()
    (parameters,) = _processed(prepared, [values])
    with _cursor(connection, prepared.sql, parameters) as cursor:
        cursor.execute(prepared.sql, parameters)
        returned = cursor.fetchall() if cursor.description else []
    return returned[0] if returned else None


def _processed(prepared: Prepared, rows: Sequence[Mapping[str, Any]]) -> list[Parameters]:
    """Each row's parameters; a value its type's processor refuses (a set in a JSON column)
    raises SQLAlchemy's StatementError, as `Connection.execute` raises it."""
    try:
        return [prepared.parameters(row) for row in rows]
    except Exception as error:
        raise StatementError(str(error), prepared.sql, None, error) from error


@contextmanager
def _cursor(
    connection: Connection, sql: str, parameters: object, given: Any = None
) -> Iterator[Any]:
    """The connection's DBAPI cursor, closed at the end; a DBAPI error inside is raised as
    SQLAlchemy's own, as `Connection.execute` raises it. A `given` cursor is its owner's,
    to close and to raise the errors of."""
    if given is not None:
        yield given
        return
    cursor = connection.connection.cursor()
    try:
        yield cursor
    except Exception as error:
        raise_as_sqlalchemy(connection, error, sql, parameters)
    finally:
        cursor.close()


def raise_as_sqlalchemy(
    connection: Connection, error: Exception, sql: str | None, parameters: object
) -> NoReturn:
    """What `Connection.execute` would raise for an error on the DBAPI's cursor: the DBAPI's
    error as SQLAlchemy's own class of it, with a lost connection invalidated, as
    SQLAlchemy does it, so that the pool discards it and the caller's rollback does not
    fail on it a second time; anything else (a value psycopg cannot adapt) as it is."""
    dbapi = connection.dialect.loaded_dbapi
    if not isinstance(error, dbapi.Error):
        raise error
    driver = connection.connection.dbapi_connection
    lost = connection.dialect.is_disconnect(error, driver, None)
    if lost:
        connection.invalidate(error)
    raise DBAPIError.instance(
        sql, parameters, error, dbapi.Error, connection_invalidated=lost
    ) from error
