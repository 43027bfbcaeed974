"""The store, read-only, for the agent's tools wherever on a cluster they run.

Apart from evolve/workers.py and evolve/proposal_making.py so that evaluation and proposal
workers, which import those modules, do not load the store and SQLAlchemy for it.
"""

from __future__ import annotations

from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from evolve.store import Store


@ray.remote(num_cpus=0)
class StoreReader:
    """Read-only access to one run for the agent's tools, wherever on a cluster they run.

    It lives on the driver's node, which can always open the store (a SQLite file is
    only there), and never writes: the engine and the ledger writer
    (evolve/ledger_writer.py) are the store's only writers."""

    def __init__(self, url: str, run_name: str) -> None:
        self.store = Store(url)
        self.run_name = run_name

    def candidate(self, candidate_id: int) -> tuple[Any, Any] | None:
        """The candidate and its latest evaluation, if it belongs to this run."""
        found = self.store.candidate(candidate_id)
        if found is None or found.run_name != self.run_name:
            return None
        evaluations = self.store.evaluations(candidate_id)
        return found, evaluations[-1] if evaluations else None

    def lineage(self, candidate_id: int) -> list[Any]:
        found = self.store.candidate(candidate_id)
        if found is None or found.run_name != self.run_name:
            return []
        return self.store.lineage(candidate_id)

    def top(self, k: int) -> list[Any]:
        return self.store.top(self.run_name, k)


def start_store_reader(url: str, run_name: str) -> ray.actor.ActorHandle:
    here = ray.get_runtime_context().get_node_id()
    return StoreReader.options(  # type: ignore[attr-defined]
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=False)
    ).remote(url, run_name)
