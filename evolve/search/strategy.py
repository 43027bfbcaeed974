"""Where parents come from: the search strategy's contract, and islands, the default.

The engine asks a strategy for a parent and a partner, and tells it every score; the
strategy decides nothing else, so MAP-Elites (map_elites.py) and a Pareto front
(pareto.py) plug in without touching the loop. Everything a strategy holds is rebuilt
from the store on resume.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from evolve.search.islands import Islands
from evolve.task.schema import Objective, SearchSpec


@dataclass(frozen=True)
class Pick:
    parent_id: int
    island: int  # where the child will live


@dataclass(frozen=True)
class Scored:
    """A candidate as the search sees it: its score (oriented so that higher is better),
    the metrics of the evaluation that gave that score, and the length of its
    EVOLVE-BLOCKs in characters (the `code_length` feature)."""

    id: int
    island: int
    score: float
    metrics: Mapping[str, float] = field(default_factory=dict)
    code_length: int = 0


class SearchStrategy(ABC):
    """The base of every search strategy plugin (registered as evolve/plugin/registry.py says; the
    task names it as `search.strategy`)."""

    @classmethod
    @abstractmethod
    def from_task(
        cls, spec: SearchSpec, objectives: Sequence[Objective], seed_id: int
    ) -> SearchStrategy:
        """The strategy for a task's `search` section, its objectives and the seed's id."""

    @abstractmethod
    def add(self, member: Scored) -> None:
        """A new or changed score."""

    @abstractmethod
    def discard(self, candidate_id: int) -> None:
        """A candidate that lost its score (a failed re-measurement) is no parent."""

    @abstractmethod
    def pick(self, rng: random.Random) -> Pick | None:
        """The next parent, or None while nothing is scored."""

    @abstractmethod
    def repair(self, parent_id: int, island: int) -> Pick:
        """A parent chosen elsewhere (a broken candidate for `fix`) takes its turn."""

    @abstractmethod
    def partner(self, pick: Pick, rng: random.Random) -> int | None:
        """A second parent, never the parent itself; None only when no other scored
        program exists to pair with."""

    @abstractmethod
    def elites(self, island: int, limit: int) -> list[int]:
        """Up to `limit` of the island's programs worth showing, best first: where prompts
        draw their inspirations from."""

    @abstractmethod
    def restore(self, scored: Iterable[Scored], migrations: Iterable[tuple[int, int]]) -> None:
        """Scored candidates and migrations (id, island) from the store, oldest first."""

    @abstractmethod
    def migrations_due(self, evaluated: int) -> list[tuple[int, int]]:
        """Moves (id, island) to apply and store after `evaluated` evaluations."""

    @abstractmethod
    def summary(self) -> str:
        """One line for the live board: how the population stands."""


class IslandStrategy(SearchStrategy):
    """Islands picked in turn, rank-biased picks within one, and a ring migration of each
    island's best every `migration_interval` evaluations. The seed lives on every island."""

    @classmethod
    def from_task(
        cls, spec: SearchSpec, objectives: Sequence[Objective], seed_id: int
    ) -> IslandStrategy:
        return cls(spec, seed_id)

    def __init__(self, spec: SearchSpec, seed_id: int) -> None:
        self.spec, self.seed_id = spec, seed_id
        self.islands = Islands(
            spec.islands, pressure=spec.selection_pressure, exploration=spec.exploration
        )
        self.next_island = 0

    def add(self, member: Scored) -> None:
        self.islands.add(member.id, member.score, self._homes(member.id, member.island))

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
        """From the pick's island, else the next island round the ring that holds another."""
        count = self.islands.count
        for step in range(count):
            island = (pick.island + step) % count
            partner_id = self.islands.pick(island, rng, besides=pick.parent_id)
            if partner_id is not None:
                return partner_id
        return None

    def elites(self, island: int, limit: int) -> list[int]:
        return self.islands.top(island, limit)

    def restore(self, scored: Iterable[Scored], migrations: Iterable[tuple[int, int]]) -> None:
        for member in scored:
            self.add(member)
        for candidate_id, island in migrations:
            self.islands.migrate(candidate_id, island)

    def migrations_due(self, evaluated: int) -> list[tuple[int, int]]:
        if evaluated % self.spec.migration_interval:
            return []
        moves = self.islands.migrants()
        for moved, island in moves:
            self.islands.migrate(moved, island)
        return moves

    def summary(self) -> str:
        sizes = "/".join(str(self.islands.size(i)) for i in range(self.islands.count))
        return f"islands: {sizes} programs"

    def _turn(self) -> int:
        island = self.next_island
        self.next_island = (island + 1) % self.islands.count
        return island

    def _homes(self, candidate_id: int, island: int) -> list[int]:
        if candidate_id == self.seed_id:
            return list(range(self.islands.count))
        return [island]
