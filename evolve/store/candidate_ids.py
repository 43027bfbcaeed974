"""Candidate ids taken from PostgreSQL's sequence ahead of their rows, a block at a time.

A new candidate's id is all the engine needs from its INSERT, and on PostgreSQL waiting
for the INSERT's answer was a round trip per candidate: in `bench/overhead.py`, the
driver waited there for a sixth of the loop. With the id known beforehand, the row waits
for its turn's end (evolve/store/deferred.py) and goes out with the turn's other writes,
in one pipeline.

The ids come from the column's own sequence, so they never collide with another process's,
and a block's unused ids (at a crash, or a rolled-back turn) are gaps, as a rolled-back
INSERT's id always was. SQLite has no sequence and no round trips; it keeps its INSERT.
"""

from __future__ import annotations

from collections import deque

from sqlalchemy import Connection, text

BLOCK = 100  # ids taken per round trip
TAKE_IDS = text(
    "SELECT nextval(pg_get_serial_sequence('candidates', 'id')) FROM generate_series(1, :count)"
)


class CandidateIds:
    """The ids this store has taken and not yet given out, lowest first."""

    def __init__(self) -> None:
        self._free: deque[int] = deque()

    def forget(self) -> None:
        """Give up the ids held: a candidate the database numbered since is newer than they
        are, and within a run ids follow the order candidates were made in (the seed is the
        run's lowest, `pending_candidates` and ties in `top` go by id)."""
        self._free.clear()

    def next(self, connection: Connection) -> int:
        if not self._free:
            self._free.extend(sorted(connection.execute(TAKE_IDS, {"count": BLOCK}).scalars()))
        return self._free.popleft()
