"""Model calls written to the store the moment they complete, from any node of a cluster.

Proposals run as Ray tasks, possibly on other machines, and a model call is paid for
whether or not its proposal ever reports back: a driver killed mid-proposal must not lose
it. So each call goes straight to this actor, which lives on the driver's node (where a
SQLite store is), and is written in its own short transaction. The engine settles the
proposal later; the actor writes nothing else.
"""

from __future__ import annotations

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from evolve.llm import LLMCall
from evolve.store import Store


@ray.remote(num_cpus=0)
class LedgerWriter:
    def __init__(self, url: str) -> None:
        self.store = Store(url)

    def record(self, proposal_id: int, call: LLMCall) -> None:
        self.store.add_proposal_call(proposal_id, call)

    def drained(self) -> None:
        """Answers once every write queued before it is done: the actor runs its calls in
        the order they arrive."""


def start_ledger_writer(url: str) -> ray.actor.ActorHandle:
    here = ray.get_runtime_context().get_node_id()
    return LedgerWriter.options(  # type: ignore[attr-defined]
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=False)
    ).remote(url)
