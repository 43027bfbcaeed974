"""What a person is told of a run's results: each candidate's figure as the referee believes
it (evolve/engine/champion.py), in the objective's own terms
(evolve/views/objective_terms.py), and the
best beside the seed.

The seed's figure is the measurement it would be crowned on, not its stored score: a seed
whose first timing was flagged as noisy and then measured twice more at 0.99 keeps 0.46 as
its stored score (a candidate's lowest measurement), and a best of 2.8 beside it would read
as six times the seed's.
"""

from __future__ import annotations

from collections.abc import Callable

from evolve.engine.champion import crowned_measurement
from evolve.store import EvaluationRecord, RunRecord, Store
from evolve.task.stored import task_info
from evolve.views.objective_terms import Terms


class RunFigures:
    """One run's figures, read from `store` as they are asked for; the run's terms and
    crowning rule are read once, from the task it stored."""

    def __init__(self, store: Store, run: RunRecord) -> None:
        info = task_info(run)
        self.store, self.run_name = store, run.name
        self.terms = Terms(info.objectives, "" if info.evaluator == "?" else info.evaluator)
        self.agreement = info.champion.agreement

    def measurement(self, candidate_id: int) -> EvaluationRecord | None:
        """The measurement the candidate's figure is told by; None while it has no score."""
        return crowned_measurement(self.store.evaluations(candidate_id), self.agreement)

    def score(self, candidate_id: int) -> float | None:
        measured = self.measurement(candidate_id)
        return measured.score if measured is not None else None

    def seed(self) -> tuple[int, float | None] | None:
        """The seed's id and figure; None for a run that has no seed yet."""
        seed = self.store.seed_candidate(self.run_name)
        return None if seed is None else (seed.id, self.score(seed.id))

    def seed_score(self) -> float | None:
        seed = self.seed()
        return seed[1] if seed is not None else None

    def headline(self, candidate_id: int) -> str:
        """`run_wall_s 0.05282 s, seed 1.954 s: 37x faster`: the candidate's figure beside
        the seed's; `no score` while it has none."""
        return self._told(candidate_id, self.terms.headline)

    def brief(self, candidate_id: int) -> str:
        """`run_wall_s 0.05282 s, 37x faster`: the figure, and how it compares with the
        seed's, for a table's cell."""

        def brief(score: float, seed: float | None) -> str:
            figure = self.terms.figure(score)
            return figure if seed is None else f"{figure}, {self.terms.against_seed(score, seed)}"

        return self._told(candidate_id, brief)

    def _told(self, candidate_id: int, tell: Callable[[float, float | None], str]) -> str:
        score = self.score(candidate_id)
        if score is None:
            return self.terms.figure(None)
        seed = self.seed()
        if seed is not None and seed[0] == candidate_id:
            return f"{self.terms.figure(score)} (the seed)"
        return tell(score, seed[1] if seed is not None else None)
