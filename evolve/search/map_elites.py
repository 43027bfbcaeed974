"""MAP-Elites: a grid over feature dimensions per island, one elite per cell.

Selection is uniform over a island's occupied cells, so a program that is best in a sparse
corner of the grid (short code, low memory, whatever the features measure) is as likely a
parent as the overall best: that is what keeps the search from collapsing onto one
lineage. `selection_pressure` and `exploration` do not apply here; the uniform draw over
cells is the exploration.

Each cell keeps every program placed in it ranked by score, not only its elite, so the
grid depends only on the latest score of each program and the islands it lives on, never
on the order they arrived in: replaying the store on resume rebuilds it exactly, and a
cell whose elite loses its score falls back to the next best.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sortedcontainers import SortedKeyList

from evolve.search.islands import Member
from evolve.search.strategy import Pick, Scored, SearchStrategy
from evolve.task.schema import FeatureSpec, Objective, SearchSpec

log = logging.getLogger(__name__)

CODE_LENGTH = "code_length"  # the feature read from Scored.code_length, not from metrics

Cell = tuple[int, ...]


def _rank_key(member: Member) -> tuple[float, int]:
    return (-member.score, member.id)


class Grid:
    """The feature axes: fixed ranges cut into equal bins; values outside clamp to the end
    bins, so an outlier still has a cell rather than being lost."""

    def __init__(self, features: Sequence[FeatureSpec]) -> None:
        self.features = tuple(features)

    @property
    def cells(self) -> int:
        return math.prod(f.bins for f in self.features)

    def cell(self, member: Scored) -> Cell | str:
        """The member's cell, or the name of the feature it lacks."""
        cell = []
        for feature in self.features:
            if feature.name == CODE_LENGTH:
                value: float | None = float(member.code_length)
            else:
                value = member.metrics.get(feature.name)
            if value is None or not math.isfinite(value):
                return feature.name
            share = (value - feature.min) / (feature.max - feature.min)
            cell.append(min(max(math.floor(share * feature.bins), 0), feature.bins - 1))
        return tuple(cell)


@dataclass
class _Placed:
    member: Member
    cell: Cell
    islands: set[int]


class _IslandGrid:
    """One island's cells, each ranking the programs placed in it, and its elites ranked."""

    def __init__(self) -> None:
        self.cells: dict[Cell, SortedKeyList] = {}
        self.elites = SortedKeyList(key=_rank_key)

    def place(self, member: Member, cell: Cell) -> None:
        ranked = self.cells.setdefault(cell, SortedKeyList(key=_rank_key))
        old_elite = ranked[0] if ranked else None
        ranked.add(member)
        self._elite_changed(old_elite, ranked[0])

    def remove(self, member: Member, cell: Cell) -> None:
        ranked = self.cells[cell]
        old_elite = ranked[0]
        ranked.remove(member)
        if not ranked:
            del self.cells[cell]
        self._elite_changed(old_elite, ranked[0] if ranked else None)

    def _elite_changed(self, old: Member | None, new: Member | None) -> None:
        if old == new:
            return
        if old is not None:
            self.elites.remove(old)
        if new is not None:
            self.elites.add(new)

    def others(self, besides: int) -> list[int]:
        """Every program on the island but `besides`: elites first, then the rest."""
        elites = [m.id for m in self.elites if m.id != besides]
        if elites:
            return elites
        return [m.id for ranked in self.cells.values() for m in ranked if m.id != besides]


class MapElitesStrategy(SearchStrategy):
    """Islands picked in turn, a uniformly random occupied cell's elite within one, and a
    ring migration of each island's best elite every `migration_interval` evaluations.
    The seed lives on every island. A program lacking a feature stays out of the grid."""

    @classmethod
    def from_task(
        cls, spec: SearchSpec, objectives: Sequence[Objective], seed_id: int
    ) -> MapElitesStrategy:
        return cls(spec, seed_id)

    def __init__(self, spec: SearchSpec, seed_id: int) -> None:
        self.spec, self.seed_id = spec, seed_id
        self.grid = Grid(spec.features)
        self.islands = [_IslandGrid() for _ in range(spec.islands)]
        self._placed: dict[int, _Placed] = {}
        self._homes: dict[int, set[int]] = {}  # islands of every program, placed or not
        self._lacking: set[str] = set()  # features already reported missing
        self.next_island = 0

    # -- what the board reads ----------------------------------------------------------

    @property
    def cells_total(self) -> int:
        return self.grid.cells

    def cells_filled(self, island: int | None = None) -> int:
        """Occupied cells on one island, or on any island."""
        if island is not None:
            return len(self.islands[island].cells)
        return len({cell for grid in self.islands for cell in grid.cells})

    def cell_of(self, candidate_id: int) -> Cell | None:
        placed = self._placed.get(candidate_id)
        return placed.cell if placed else None

    def summary(self) -> str:
        return f"MAP-Elites: {self.cells_filled()} of {self.cells_total} cells filled"

    # -- the strategy ------------------------------------------------------------------

    def add(self, member: Scored) -> None:
        homes = self._homes.setdefault(member.id, set())
        homes |= set(range(len(self.islands))) if member.id == self.seed_id else {member.island}
        self._unplace(member.id)
        cell = self.grid.cell(member)
        if isinstance(cell, str):
            if cell not in self._lacking:
                self._lacking.add(cell)
                log.warning(
                    "#%d has no finite %r: kept out of the MAP-Elites grid, as will be any "
                    "other program without it",
                    member.id,
                    cell,
                )
            return
        self._place(member.id, member.score, cell, homes)

    def discard(self, candidate_id: int) -> None:
        self._unplace(candidate_id)

    def pick(self, rng: random.Random) -> Pick | None:
        island = self._turn()
        if not self.islands[island].elites:  # still empty: borrow from the fullest
            island = max(range(len(self.islands)), key=lambda i: len(self.islands[i].elites))
        elites = self.islands[island].elites
        if not elites:
            return None
        return Pick(elites[rng.randrange(len(elites))].id, island)

    def repair(self, parent_id: int, island: int) -> Pick:
        self._turn()
        return Pick(parent_id, island)

    def partner(self, pick: Pick, rng: random.Random) -> int | None:
        """Another elite of the pick's island, else another of its programs, else one from
        the next island round the ring that holds one."""
        count = len(self.islands)
        for step in range(count):
            others = self.islands[(pick.island + step) % count].others(pick.parent_id)
            if others:
                return others[rng.randrange(len(others))]
        return None

    def elites(self, island: int, limit: int) -> list[int]:
        return [member.id for member in self.islands[island].elites[:limit]]

    def restore(self, scored: Iterable[Scored], migrations: Iterable[tuple[int, int]]) -> None:
        for member in scored:
            self.add(member)
        for candidate_id, island in migrations:
            self._migrate(candidate_id, island)

    def migrations_due(self, evaluated: int) -> list[tuple[int, int]]:
        if evaluated % self.spec.migration_interval:
            return []
        count = len(self.islands)
        moves = []
        for island, grid in enumerate(self.islands):
            target = (island + 1) % count
            if grid.elites and target != island:
                best = grid.elites[0].id
                if target not in self._placed[best].islands:
                    moves.append((best, target))
        for moved, island in moves:
            self._migrate(moved, island)
        return moves

    # -- helpers -----------------------------------------------------------------------

    def _migrate(self, candidate_id: int, island: int) -> None:
        """Also place a program on `island`; one that has since lost its score, or lacks a
        feature, stays out."""
        self._homes.setdefault(candidate_id, set()).add(island)
        placed = self._placed.get(candidate_id)
        if placed and island not in placed.islands:
            placed.islands.add(island)
            self.islands[island].place(placed.member, placed.cell)

    def _place(self, candidate_id: int, score: float, cell: Cell, homes: set[int]) -> None:
        member = Member(candidate_id, score)
        self._placed[candidate_id] = _Placed(member, cell, set(homes))
        for island in homes:
            self.islands[island].place(member, cell)

    def _unplace(self, candidate_id: int) -> None:
        placed = self._placed.pop(candidate_id, None)
        if placed:
            for island in placed.islands:
                self.islands[island].remove(placed.member, placed.cell)

    def _turn(self) -> int:
        island = self.next_island
        self.next_island = (island + 1) % len(self.islands)
        return island
