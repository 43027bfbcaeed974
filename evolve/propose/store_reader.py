"""The store, read-only, for the agent's tools wherever they run: an actor
(evolve/executors/) on the driver's machine.

Apart from evolve/engine/workers.py and evolve/propose/making.py so that evaluation and proposal
workers, which import those modules, do not load the store and SQLAlchemy for it.
"""

from __future__ import annotations

from typing import Any

from evolve.engine.champion import champion_of
from evolve.store import CandidateRecord, Store
from evolve.store.evaluations import scoring_evaluation


class StoreReader:
    """Read-only access to one run for the agent's tools, wherever on a cluster they run.

    It lives on the driver's node, which can always open the store (a SQLite file is
    only there), and never writes: the engine and the ledger writer
    (evolve/propose/ledger_writer.py) are the store's only writers."""

    def __init__(self, url: str, run_name: str) -> None:
        self.store = Store(url)
        self.run_name = run_name

    def candidate(self, candidate_id: int) -> tuple[Any, Any] | None:
        """The candidate and the evaluation that gave its score (else its latest), if it
        belongs to this run: the metrics shown beside a score are the ones behind it."""
        found = self.store.candidate(candidate_id)
        if found is None or found.run_name != self.run_name:
            return None
        evaluations = self.store.evaluations(candidate_id)
        shown = scoring_evaluation(evaluations) or (evaluations[-1] if evaluations else None)
        return found, shown

    def lineage(self, candidate_id: int) -> list[Any]:
        found = self.store.candidate(candidate_id)
        if found is None or found.run_name != self.run_name:
            return []
        return self.store.lineage(candidate_id)

    def top(self, k: int) -> list[tuple[Any, str]]:
        return standings(self.store, self.run_name, k)


def standings(store: Store, run_name: str, k: int) -> list[tuple[CandidateRecord, str]]:
    """Up to `k` programs: the crowned champion first, then the best of the rest, each
    with how far its score is to be believed. One ranking above the champion was measured
    once, or is flagged and its measurements disagree: its score may not stand."""
    run = store.get_run(run_name)
    champion = champion_of(store, run) if run is not None else None
    ranked = [c for c in store.top(run_name, k + 1) if champion is None or c.id != champion.id]
    shown: list[tuple[CandidateRecord, str]] = []
    if champion is not None:
        shown.append((champion, f"crowned; {_measured(champion)}"))
    for candidate in ranked[: k - len(shown)]:
        above = champion is not None and (candidate.score or 0.0) > (champion.score or 0.0)
        doubt = "not crowned, its score not yet confirmed; " if above else ""
        shown.append((candidate, doubt + _measured(candidate)))
    return shown


def _measured(candidate: CandidateRecord) -> str:
    if candidate.measurements > 1:
        return f"the lowest of {candidate.measurements} measurements"
    return "measured once"
