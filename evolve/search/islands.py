"""Islands of ranked candidates with ring migration.

Each island keeps its members sorted by score, so picking the r-th best is O(log n) and
adding a result is O(log n); nothing here ever copies or scans a population.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from sortedcontainers import SortedKeyList

from evolve.search.selection import power_law_rank


@dataclass(frozen=True)
class Member:
    id: int
    score: float


def _rank_key(member: Member) -> tuple[float, int]:
    return (-member.score, member.id)


class Islands:
    def __init__(self, count: int, *, pressure: float, exploration: float) -> None:
        self.pressure = pressure
        self.exploration = exploration
        self._ranked = [SortedKeyList(key=_rank_key) for _ in range(count)]
        self._where: dict[int, tuple[float, set[int]]] = {}  # id -> (score, islands)

    @property
    def count(self) -> int:
        return len(self._ranked)

    def size(self, island: int) -> int:
        return len(self._ranked[island])

    def add(self, candidate_id: int, score: float, islands: list[int]) -> None:
        """Place a scored candidate on islands; a new score for a known one re-ranks it."""
        old = self._where.get(candidate_id)
        homes = set(islands) | (old[1] if old else set())
        if old:
            for island in old[1]:
                self._ranked[island].remove(Member(candidate_id, old[0]))
        for island in homes:
            self._ranked[island].add(Member(candidate_id, score))
        self._where[candidate_id] = (score, homes)

    def discard(self, candidate_id: int) -> None:
        """Drop a candidate that lost its score (a failed re-measurement)."""
        old = self._where.pop(candidate_id, None)
        if old:
            for island in old[1]:
                self._ranked[island].remove(Member(candidate_id, old[0]))

    def pick(self, island: int, rng: random.Random, besides: int | None = None) -> int | None:
        """An id from the island: rank-biased, with an `exploration` share uniform. `besides`
        is left out of the draw (a crossover partner is never its parent), by drawing over
        the others' ranks rather than drawing again, so one draw always suffices."""
        ranked = self._ranked[island]
        skip = self._position(besides, island)
        n = len(ranked) - (skip is not None)
        if n <= 0:
            return None
        if rng.random() < self.exploration:
            rank = rng.randrange(n)
        else:
            rank = power_law_rank(rng, n, self.pressure)
        if skip is not None and rank >= skip:
            rank += 1
        return ranked[rank].id

    def _position(self, candidate_id: int | None, island: int) -> int | None:
        where = self._where.get(candidate_id) if candidate_id is not None else None
        if where is None or island not in where[1]:
            return None
        return self._ranked[island].index(Member(candidate_id, where[0]))

    def top(self, island: int, limit: int) -> list[int]:
        """The island's `limit` best, best first."""
        return [member.id for member in self._ranked[island][:limit]]

    def best(self, island: int) -> int | None:
        ranked = self._ranked[island]
        return ranked[0].id if ranked else None

    def migrants(self) -> list[tuple[int, int]]:
        """(candidate, destination) pairs for one ring step: each island's best moves on."""
        moves = []
        for island in range(self.count):
            best = self.best(island)
            target = (island + 1) % self.count
            if best is not None and target != island and target not in self._where[best][1]:
                moves.append((best, target))
        return moves

    def migrate(self, candidate_id: int, island: int) -> None:
        """Also place a candidate on `island`; one that has since lost its score stays out."""
        if candidate_id in self._where:
            self.add(candidate_id, self._where[candidate_id][0], [island])
