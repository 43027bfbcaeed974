"""Pareto search: NSGA-II ranks and crowding over the task's objectives, each with its
direction, instead of their weighted sum.

A weighted sum only ever climbs toward one trade-off, the one its weights pick; the front
keeps every program that no other beats on all objectives at once (fast but large, small
but slow), so the search can cross from one end of the trade-off to the other.

The population is pooled: islands only spread the children out for the board, and there
is no migration. Ranks are recomputed from all members, vectorised, whenever a pick
follows a change: for two objectives in O(n) per front (tens of ms for 5000 programs), for
more through the n x n domination matrix (about 0.3 s for 5000).
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from evolve.search.strategy import Pick, Scored, SearchStrategy
from evolve.task.schema import Objective, SearchSpec

log = logging.getLogger(__name__)


def oriented(values: Sequence[float], directions: Sequence[str]) -> list[float]:
    """Values turned so that higher is better on every objective."""
    return [v if d == "maximize" else -v for v, d in zip(values, directions, strict=True)]


def non_dominated_ranks(points: np.ndarray) -> np.ndarray:
    """The front (0 = non-dominated) of each row of `points` (n x m, higher is better)."""
    if points.shape[1] == 2:
        return _ranks_of_two(points)
    return _ranks_by_matrix(points)


def _ranks_of_two(points: np.ndarray) -> np.ndarray:
    """Two objectives, the usual case, in O(n) per front: sorted by the first objective
    (then the second) descending, every point that could dominate a row comes before it,
    so a row is on the front when no earlier row, other than its own copies, reaches its
    second objective."""
    n = len(points)
    order = np.lexsort((-points[:, 1], -points[:, 0]))
    first, second = points[order, 0], points[order, 1]
    ranks = np.full(n, -1)
    left = np.arange(n)  # positions in `order` not yet on a front
    rank = 0
    while left.size:
        a, b = first[left], second[left]
        starts = np.ones(left.size, dtype=bool)  # where a run of equal points starts
        starts[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
        run_start = np.maximum.accumulate(np.where(starts, np.arange(left.size), 0))
        reached = np.concatenate(([-math.inf], np.maximum.accumulate(b)[:-1]))
        on_front = reached[run_start] < b
        ranks[order[left[on_front]]] = rank
        left = left[~on_front]
        rank += 1
    return ranks


def _ranks_by_matrix(points: np.ndarray) -> np.ndarray:
    """Any number of objectives, by peeling fronts off the domination matrix: O(n^2)."""
    n = len(points)
    at_least = np.ones((n, n), dtype=bool)
    beyond = np.zeros((n, n), dtype=bool)
    for column in points.T:  # one objective at a time keeps memory at n^2, not n^2 * m
        at_least &= column[:, None] >= column[None, :]
        beyond |= column[:, None] > column[None, :]
    dominates = at_least & beyond  # [i, j]: i dominates j
    dominated_by = dominates.sum(axis=0)
    ranks = np.full(n, -1)
    front = np.flatnonzero(dominated_by == 0)
    rank = 0
    while front.size:
        ranks[front] = rank
        dominated_by -= dominates[front].sum(axis=0)
        dominated_by[front] = -1  # placed: never a front again
        front = np.flatnonzero(dominated_by == 0)
        rank += 1
    return ranks


def crowding_distances(points: np.ndarray) -> np.ndarray:
    """NSGA-II crowding distance of each row within its front (the rows given): the
    perimeter of the box its neighbours span, per objective normalised by the front's
    range; the ends of every objective get infinity, so they are always kept."""
    n, m = points.shape
    distance = np.zeros(n)
    if n <= 2:
        distance[:] = math.inf
        return distance
    for k in range(m):
        order = np.argsort(points[:, k], kind="stable")
        column = points[order, k]
        distance[order[0]] = distance[order[-1]] = math.inf
        span = column[-1] - column[0]
        if span > 0:
            distance[order[1:-1]] += (column[2:] - column[:-2]) / span
    return distance


def pareto_front(points: Mapping[int, Sequence[float]], directions: Sequence[str]) -> set[int]:
    """The ids whose points no other point dominates; directions are "maximize" or
    "minimize", one per coordinate. Equal points are all on the front; a point with a
    non-finite coordinate is on no front."""
    points = {i: p for i, p in points.items() if all(math.isfinite(v) for v in p)}
    if not points:
        return set()
    ids = list(points)
    matrix = np.array([oriented(points[i], directions) for i in ids], dtype=float)
    ranks = non_dominated_ranks(matrix)
    return {ids[i] for i in np.flatnonzero(ranks == 0)}


class ParetoStrategy(SearchStrategy):
    """Parents by binary tournament on (front, then larger crowding), over all islands."""

    @classmethod
    def from_task(
        cls, spec: SearchSpec, objectives: Sequence[Objective], seed_id: int
    ) -> ParetoStrategy:
        return cls(spec, objectives)

    def __init__(self, spec: SearchSpec, objectives: Sequence[Objective]) -> None:
        if len(objectives) < 2:
            raise ValueError("strategy pareto needs at least two objectives")
        self.spec = spec
        self.objectives = tuple(objectives)
        self._points: dict[int, tuple[list[float], float]] = {}  # id -> (oriented, score)
        self._lacking: set[str] = set()
        self._ids: list[int] = []  # as of the last refresh, by id
        self._index: dict[int, int] = {}  # id -> its place in _ids
        self._ranks = np.zeros(0, dtype=int)
        self._crowding = np.zeros(0)
        self._stale = False
        self.next_island = 0

    # -- what the board reads ----------------------------------------------------------

    def front(self) -> set[int]:
        self._refresh()
        return {self._ids[i] for i in np.flatnonzero(self._ranks == 0)}

    def rank_of(self, candidate_id: int) -> int | None:
        self._refresh()
        index = self._index.get(candidate_id)
        return None if index is None else int(self._ranks[index])

    def summary(self) -> str:
        return f"Pareto front: {len(self.front())} of {len(self._points)} programs"

    # -- the strategy ------------------------------------------------------------------

    def add(self, member: Scored) -> None:
        self._stale = True
        missing = [o.name for o in self.objectives
                   if not math.isfinite(member.metrics.get(o.name, math.nan))]  # fmt: skip
        if missing:
            self._points.pop(member.id, None)
            if missing[0] not in self._lacking:
                self._lacking.add(missing[0])
                log.warning(
                    "#%d has no finite %r: kept off the Pareto front, as will be any other "
                    "program without it",
                    member.id,
                    missing[0],
                )
            return
        values = [member.metrics[o.name] for o in self.objectives]
        directions = [o.direction for o in self.objectives]
        self._points[member.id] = (oriented(values, directions), member.score)

    def discard(self, candidate_id: int) -> None:
        if self._points.pop(candidate_id, None) is not None:
            self._stale = True

    def pick(self, rng: random.Random) -> Pick | None:
        self._refresh()
        if not self._ids:
            return None
        return Pick(self._ids[self._tournament(rng, None)], self._turn())

    def repair(self, parent_id: int, island: int) -> Pick:
        self._turn()
        return Pick(parent_id, island)

    def partner(self, pick: Pick, rng: random.Random) -> int | None:
        self._refresh()
        skip = self._index.get(pick.parent_id)
        if len(self._ids) - (skip is not None) <= 0:
            return None
        return self._ids[self._tournament(rng, skip)]

    def elites(self, island: int, limit: int) -> list[int]:
        """The same for every island (the population is pooled): the first front, then the
        next, each by score, so the first is the best by the weighted sum."""
        self._refresh()
        order = sorted(
            range(len(self._ids)),
            key=lambda i: (self._ranks[i], -self._points[self._ids[i]][1], self._ids[i]),
        )
        return [self._ids[i] for i in order[:limit]]

    def restore(self, scored: Iterable[Scored], migrations: Iterable[tuple[int, int]]) -> None:
        for member in scored:
            self.add(member)

    def migrations_due(self, evaluated: int) -> list[tuple[int, int]]:
        return []

    # -- helpers -----------------------------------------------------------------------

    def _tournament(self, rng: random.Random, skip: int | None) -> int:
        """The better of two distinct members drawn uniformly, leaving out index `skip`."""
        n = len(self._ids) - (skip is not None)
        drawn = rng.sample(range(n), min(2, n))
        if skip is not None:
            drawn = [i + (i >= skip) for i in drawn]
        return min(drawn, key=lambda i: (self._ranks[i], -self._crowding[i]))

    def _refresh(self) -> None:
        if not self._stale:
            return
        self._stale = False
        self._ids = sorted(self._points)
        self._index = {candidate_id: i for i, candidate_id in enumerate(self._ids)}
        points = np.array([self._points[i][0] for i in self._ids], dtype=float)
        points = points.reshape(len(self._ids), len(self.objectives))
        self._ranks = non_dominated_ranks(points)
        self._crowding = np.zeros(len(self._ids))
        by_rank = np.argsort(self._ranks, kind="stable")
        for front in np.split(by_rank, np.flatnonzero(np.diff(self._ranks[by_rank])) + 1):
            self._crowding[front] = crowding_distances(points[front])

    def _turn(self) -> int:
        island = self.next_island
        self.next_island = (island + 1) % self.spec.islands
        return island
