"""The one process that holds a run's services: the ledger writer (evolve/ledger_writer.py)
and the per-provider circuits (evolve/llm/circuit.py).

Each was an actor of its own, and so a Ray worker process of its own: about 90 MB each, and
a second of start-up apiece, which Ray runs at most one per CPU at a time, ahead of the
proposal workers that need them. Here both live in one actor, in two concurrency groups of
one thread each: a slow write never holds up a circuit's answer, and each part still takes
its calls one at a time, in the order they came (which `drained` relies on).
"""

from __future__ import annotations

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from evolve.ledger_writer import LedgerWriter
from evolve.llm import LLMCall
from evolve.llm.circuit import BASE_S, CAP_S, ProviderCircuits, State
from evolve.llm.records import Status


@ray.remote(num_cpus=0, concurrency_groups={"ledger": 1, "circuits": 1})
class ServiceHost:
    """A model call's `sink` and its circuits' actor (evolve/llm/hooks.py) at once."""

    def __init__(self, url: str, base_s: float, cap_s: float) -> None:
        self.ledger = LedgerWriter(url)
        self.circuits = ProviderCircuits(base_s, cap_s)

    @ray.method(concurrency_group="ledger")
    def record(self, proposal_id: int, call: LLMCall) -> None:
        self.ledger.record(proposal_id, call)

    @ray.method(concurrency_group="ledger")
    def drained(self) -> None:
        """Answers once every write queued before it is done."""

    @ray.method(concurrency_group="circuits")
    def ask(self, key: str) -> tuple[float, State]:
        return self.circuits.ask(key)

    @ray.method(concurrency_group="circuits")
    def report(self, key: str, status: Status, retry_after: float | None = None) -> None:
        self.circuits.report(key, status, retry_after)

    @ray.method(concurrency_group="circuits")
    def status(self) -> dict[str, str]:
        return self.circuits.status()


def start_service_host(
    url: str, base_s: float = BASE_S, cap_s: float = CAP_S
) -> ray.actor.ActorHandle:
    """On this (the driver's) node, which outlives every worker, and holds a SQLite store."""
    here = ray.get_runtime_context().get_node_id()
    return ServiceHost.options(  # type: ignore[attr-defined]
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=False)
    ).remote(url, base_s, cap_s)
