"""Alembic's entry point for the store's migrations.

`Store` hands over its live connection through `config.attributes["connection"]`, so the
upgrade runs inside the store's own transaction and needs no alembic.ini on the user's disk.
Without one (a developer running `alembic -c evolve/store/alembic.ini revision
--autogenerate`), the URL comes from the ini file.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from evolve.store.schema import Base


def run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        # SQLite cannot ALTER most things in place; batch mode copies the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


given = context.config.attributes.get("connection")
if given is not None:
    run(given)
else:
    engine = create_engine(context.config.get_main_option("sqlalchemy.url", ""))
    with engine.connect() as connection:
        run(connection)
    engine.dispose()
