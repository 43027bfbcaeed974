"""A new, empty database gets the whole schema at once, stamped as the newest migration.

Running every migration from the first (evolve/store/upgrade.py) took a new store 120-150
ms and loaded Alembic with its Mako templates, 12 MB that a driver then kept for the whole
run; and every first run opens a new store. tests/test_store.py holds the migrations and
the models to the same schema, so creating the models' tables and writing the head
revision where Alembic keeps it gives the database the migrations would. A database that
is behind, or that holds tables of its own without Alembic's, still goes through Alembic.
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Engine,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    inspect,
    text,
)

from evolve.store.schema import Base

# Alembic's own version table, as Alembic creates it, so that a later upgrade reads it.
VERSIONS = Table(
    "alembic_version",
    MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)
# PostgreSQL takes no lock for reading an empty schema, so two stores created at once
# would both create the tables, and one would fail; this transaction lock makes the second
# wait for the first. Any 64-bit number, the same in every process: "evolve" in ASCII.
SCHEMA_LOCK = 0x65766F6C7665


def create_if_new(writer: Engine, head: str) -> bool:
    """Whether the database was empty and now holds the schema at `head`. One write
    transaction (on SQLite, BEGIN IMMEDIATE; on PostgreSQL, under SCHEMA_LOCK): a store
    opened at the same moment elsewhere waits, then finds the tables and leaves them to
    Alembic, which finds them at head."""
    with writer.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
        if set(inspect(connection).get_table_names()) & {VERSIONS.name, *Base.metadata.tables}:
            return False
        Base.metadata.create_all(connection)
        VERSIONS.create(connection)
        connection.execute(VERSIONS.insert(), {"version_num": head})
    return True
