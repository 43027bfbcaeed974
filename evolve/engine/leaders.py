"""The run's best candidates, kept in memory by the engine, so that the live board knows
when its table changed without asking the store twice a second.

The ranking is the store's: score first (higher is better), the older candidate first
among equals. `version` moves whenever a candidate in the table, or one entering it, is
measured again, so the board redraws for a changed count of measurements too.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

SHOWN = 10  # the live board's table


def _rank(item: tuple[int, float]) -> tuple[float, int]:
    candidate_id, score = item
    return score, -candidate_id


class Leaders:
    def __init__(self, size: int = SHOWN) -> None:
        self.size = size
        self.scores: dict[int, float] = {}
        self.top: tuple[int, ...] = ()
        self.version = 0
        self._stale = False

    def restore(self, scored: Iterable[tuple[int, float]]) -> None:
        """(id, score) of every scored candidate of a resumed run."""
        self.scores.update(scored)
        self._stale = True
        self.version += 1

    def update(self, candidate_id: int, score: float | None) -> None:
        """A candidate's score after an evaluation; None when it has none (failed)."""
        self.scores.pop(candidate_id, None)
        if score is not None:
            self.scores[candidate_id] = score
        if (
            self._stale
            or candidate_id in self.top
            or (score is not None and self._enters(candidate_id, score))
        ):
            self._stale = True
            self.version += 1

    def current(self) -> tuple[int, ...]:
        """The ids shown, best first; recomputed only after a change that reached them."""
        if self._stale:
            best = heapq.nlargest(self.size, self.scores.items(), key=_rank)
            self.top = tuple(candidate_id for candidate_id, _ in best)
            self._stale = False
        return self.top

    def _enters(self, candidate_id: int, score: float) -> bool:
        """Whether it beats the last shown; only asked while the table is up to date."""
        top = self.top
        if len(top) < self.size:
            return True
        last = top[-1]
        return _rank((candidate_id, score)) > _rank((last, self.scores[last]))
