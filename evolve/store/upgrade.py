"""Bringing a database's schema to head with Alembic, from the migrations beside this file.

Only a database that is behind needs this (evolve/store/database.py; a new one gets its
tables at once, evolve/store/new_schema.py), so Alembic, with the Mako templates it loads,
stays out of every process that opens a current one.
"""

from __future__ import annotations

import threading
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

MIGRATIONS = Path(__file__).parent / "migrations"
# Alembic runs env.py through module-level proxies (alembic.context, alembic.op), so two
# upgrades in one process at once would trample each other's state.
_UPGRADE_LOCK = threading.Lock()


def upgrade_to_head(writer: Engine) -> None:
    """Every migration not yet applied, in one transaction of the store's writer (which, on
    SQLite, begins IMMEDIATE: another process upgrading at once waits, then finds head)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with _UPGRADE_LOCK, writer.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
