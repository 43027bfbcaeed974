"""Where parents come from: the search strategy's contract, and islands as the one we have.

The engine asks a strategy for a parent and a partner, and tells it every score; the
strategy decides nothing else, so MAP-Elites or a Pareto front plugs in here without
touching the loop. Everything a strategy holds is rebuilt from the store on resume.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from evolve.search.islands import Islands
from evolve.task import SearchSpec


@dataclass(frozen=True)
class Pick:
    parent_id: int
    island: int  # where the child will live


class SearchStrategy(Protocol):
    def add(self, candidate_id: int, score: float, island: int) -> None:
        """A new or changed score, oriented so that higher is better."""
        ...

    def discard(self, candidate_id: int) -> None:
        """A candidate that lost its score (a failed re-measurement) is no parent."""
        ...

    def pick(self, rng: random.Random) -> Pick | None:
        """The next parent, or None while nothing is scored."""
        ...

    def repair(self, parent_id: int, island: int) -> Pick:
        """A parent chosen elsewhere (a broken candidate for `fix`) takes its turn."""
        ...

    def partner(self, pick: Pick, rng: random.Random) -> int | None:
        """Another program to show beside the parent, never the parent itself."""
        ...

    def restore(
        self, scored: Iterable[tuple[int, int, float]], migrations: Iterable[tuple[int, int]]
    ) -> None:
        """Scores (id, island, score) and migrations (id, island) from the store."""
        ...

    def migrations_due(self, evaluated: int) -> list[tuple[int, int]]:
        """Moves (id, island) to apply and store after `evaluated` evaluations."""
        ...


class IslandStrategy:
    """Islands picked in turn, rank-biased picks within one, and a ring migration of each
    island's best every `migration_interval` evaluations. The seed lives on every island."""

    def __init__(self, spec: SearchSpec, seed_id: int) -> None:
        self.spec, self.seed_id = spec, seed_id
        self.islands = Islands(
            spec.islands, pressure=spec.selection_pressure, exploration=spec.exploration
        )
        self.next_island = 0

    def add(self, candidate_id: int, score: float, island: int) -> None:
        self.islands.add(candidate_id, score, self._homes(candidate_id, island))

    def discard(self, candidate_id: int) -> None:
        self.islands.discard(candidate_id)

    def pick(self, rng: random.Random) -> Pick | None:
        island = self._turn()
        parent_id = self.islands.pick(island, rng)
        if parent_id is None:  # this island is still empty: borrow from the fullest
            island = max(range(self.islands.count), key=self.islands.size)
            parent_id = self.islands.pick(island, rng)
            if parent_id is None:
                return None
        return Pick(parent_id, island)

    def repair(self, parent_id: int, island: int) -> Pick:
        self._turn()
        return Pick(parent_id, island)

    def partner(self, pick: Pick, rng: random.Random) -> int | None:
        partner_id = self.islands.pick(pick.island, rng)
        return partner_id if partner_id != pick.parent_id else None

    def restore(
        self, scored: Iterable[tuple[int, int, float]], migrations: Iterable[tuple[int, int]]
    ) -> None:
        for candidate_id, island, value in scored:
            self.add(candidate_id, value, island)
        for candidate_id, island in migrations:
            self.islands.migrate(candidate_id, island)

    def migrations_due(self, evaluated: int) -> list[tuple[int, int]]:
        if evaluated % self.spec.migration_interval:
            return []
        moves = self.islands.migrants()
        for moved, island in moves:
            self.islands.migrate(moved, island)
        return moves

    def _turn(self) -> int:
        island = self.next_island
        self.next_island = (island + 1) % self.islands.count
        return island

    def _homes(self, candidate_id: int, island: int) -> list[int]:
        if candidate_id == self.seed_id:
            return list(range(self.islands.count))
        return [island]
