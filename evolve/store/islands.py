"""Island migrations: which candidate moved to which island, in order, for resuming a search.

(Not to be confused with `migrations/`, Alembic's schema migrations.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from sqlalchemy import select

from evolve.store.database import Database
from evolve.store.records import MigrationRecord
from evolve.store.schema import Migration


class IslandMigrations(Database):
    """The store's record of candidates copied between islands."""

    def add_migration(self, run_name: str, candidate_id: int, to_island: int) -> None:
        row = Migration(
            run_name=run_name,
            candidate_id=candidate_id,
            to_island=to_island,
            created_at=time.time(),
        )
        with self._write() as session, session.begin():
            session.add(row)

    def migrations(self, run_name: str) -> list[tuple[int, int]]:
        """(candidate id, destination island), in the order they happened."""
        query = (
            select(Migration.candidate_id, Migration.to_island)
            .where(Migration.run_name == run_name)
            .order_by(Migration.id)
        )
        with self._read() as session:
            return [(candidate_id, island) for candidate_id, island in session.execute(query)]

    def each_migration(self, run_name: str) -> Iterator[MigrationRecord]:
        """The run's migrations with every column, in order, a page at a time: for exports."""
        table = Migration.__table__
        query = select(*table.c).where(table.c.run_name == run_name)
        return self._pages(query, table.c.id, MigrationRecord.of)
