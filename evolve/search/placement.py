"""Where the search places a scored candidate: its score, the metrics of the evaluation
that gave that score, and its code length. MAP-Elites cells and Pareto objectives are read
from these metrics, so they must be the scoring evaluation's, as the board shows them,
not merely the latest."""

from __future__ import annotations

from collections.abc import Sequence

from evolve.engine.scoring import score
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult
from evolve.search.strategy import Scored
from evolve.store import CandidateRecord, Store
from evolve.store.evaluations import scoring_evaluation
from evolve.task.schema import Objective


def placement(
    store: Store, objectives: Sequence[Objective], candidate: CandidateRecord, result: EvalResult
) -> Scored:
    """A candidate just (re)measured by `result`; a re-measurement that did not lower its
    score leaves it placed by the evaluation that did."""
    if candidate.score is None:
        raise ValueError(f"#{candidate.id} has no score to place it by")
    metrics = dict(result.metrics)
    if score(metrics, objectives) != candidate.score:
        shown = scoring_evaluation(store.evaluations(candidate.id))
        metrics = shown.metrics if shown else metrics
    code_length = candidate.program.code_length
    return Scored(candidate.id, candidate.island, candidate.score, metrics, code_length)


def stored_placements(
    store: Store, run_name: str, programs: Sequence[tuple[int, Program]]
) -> list[Scored]:
    """Every scored candidate of the run, oldest first, for a resumed search; `programs`
    are the run's (Store.programs), read once for this and the novelty index."""
    metrics = store.scoring_metrics(run_name)
    lengths = {id_: program.code_length for id_, program in programs}
    return [
        Scored(id_, island, value, metrics.get(id_, {}), lengths[id_])
        for id_, island, value in store.scored(run_name)
    ]
