"""Where model proposals run: a few long-lived Ray actors, each answering many proposals at
once on threads, not a Ray task (and a worker process) per proposal.

A proposal spends its time waiting on a model's HTTP reply. A task per proposal paid for
that wait with a process per request in flight (about 150 MB each with the SDKs loaded),
a fresh deserialised mutator and a new HTTP connection every time. An actor keeps its
mutators, and its threads share one SDK client per endpoint and key, whose connections
last from one proposal to the next (evolve/llm/client.py). Each thread has copies of the
mutators of its own: they were written for one proposal at a time (an agent's evaluator),
and copies share no state.

The actors take no CPU slot, so a slow model never holds an evaluation slot idle, and
Ray restarts one that dies (its proposals in flight come back as lost, and are settled
so). They end with the run. Each is handed the run's service host (its ledger writer and
circuits) once, when it starts: an actor handle sent with every proposal cost a
deserialisation each time.
"""

from __future__ import annotations

import math
import pickle
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import ray
from ray import cloudpickle
from ray.actor import ActorHandle

from evolve.llm.circuit import SharedCircuits
from evolve.llm.client import preload
from evolve.llm.config import Provider
from evolve.llm.hooks import CallHooks
from evolve.mutators import MutationRequest, Mutator, Proposal
from evolve.secrets import Keys
from evolve.workers import MutationFailed, make_proposal

if TYPE_CHECKING:  # the store it starts is the driver's; these actors never load it
    from evolve.services import RunServices

THREADS = 32  # proposals one actor works on at once


@ray.remote(num_cpus=0, max_restarts=-1)
class ProposalWorker:
    def __init__(
        self, mutators: bytes, services: ActorHandle | None, providers: Sequence[Provider]
    ) -> None:
        """`mutators` pickled, unpickled once per thread; `services` is the run's service
        host (evolve/service_host.py), which a model proposal's calls report to;
        `providers`, those of the task's models, whose SDKs (a second or more each) load
        now, while the evaluation workers set up and the seed is evaluated, and not on the
        first proposal."""
        self.pickled = mutators
        self.local = threading.local()
        self.host = services
        self.circuits = SharedCircuits(services) if services is not None else None
        preload(providers)

    def propose(
        self, name: str, request: MutationRequest, keys: Keys, proposal_id: int, model_made: bool
    ) -> Proposal | MutationFailed:
        mine: dict[str, Mutator] | None = getattr(self.local, "mutators", None)
        if mine is None:
            mine = self.local.mutators = pickle.loads(self.pickled)
        hooks = CallHooks(proposal_id)
        if model_made:
            hooks = CallHooks(proposal_id, sink=self.host, gate=self.circuits)
        return make_proposal(mine[name], request, keys, hooks)


class ProposalWorkers:
    """Enough actors for `in_flight` proposals at once, each proposal sent to the one with
    the fewest in flight."""

    def __init__(
        self,
        mutators: Mapping[str, Mutator],
        in_flight: int,
        services: RunServices,
        providers: Sequence[Provider],
    ) -> None:
        self.wanted = bool(mutators)
        self.pickled = cloudpickle.dumps(dict(mutators))  # a task's own classes by value
        self.services = services
        self.providers = tuple(providers)
        self.count = max(1, math.ceil(in_flight / THREADS))
        self.actors: list[ActorHandle] = []
        self.busy: dict[ray.ObjectRef, ActorHandle] = {}

    def start(self) -> None:
        """Ask Ray for the actors, without waiting: they start while the seed is evaluated,
        not after it. A run whose proposals are all made in the driver needs none."""
        if not self.actors and self.wanted:
            worker = ProposalWorker.options(max_concurrency=THREADS)  # type: ignore[attr-defined]
            host = self.services.host
            self.actors = [
                worker.remote(self.pickled, host, self.providers) for _ in range(self.count)
            ]

    def submit(
        self, name: str, request: MutationRequest, keys: Keys, proposal_id: int, model_made: bool
    ) -> ray.ObjectRef:
        """`model_made`: the proposal's model calls go to the run's ledger and circuits."""
        self.start()
        load = {id(actor): 0 for actor in self.actors}
        for actor in self.busy.values():
            load[id(actor)] += 1
        actor = min(self.actors, key=lambda a: load[id(a)])
        ref = actor.propose.remote(name, request, keys, proposal_id, model_made)
        self.busy[ref] = actor
        return ref

    def done(self, ref: ray.ObjectRef) -> None:
        self.busy.pop(ref, None)

    def close(self) -> None:
        """Proposals still running are abandoned with their actors."""
        for actor in self.actors:
            ray.kill(actor)
        self.actors, self.busy = [], {}
