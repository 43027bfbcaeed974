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
so). They end with the run. The first one hosts the run's services, its ledger writer and
circuits (evolve/service_host.py), on the driver's node, which outlives every worker and
holds a SQLite store; the others are handed it once, when they start: an actor handle sent
with every proposal cost a deserialisation each time.

Each actor works on a set number of proposals at once, its share of the run's model slots;
the driver sends as many again, which wait in the actor for a slot (evolve/fair_slots.py).
A reply frees its slot for a waiting proposal at once, not after a trip through the driver
and the store (10 to 50 ms, more when a burst of replies arrives together): at a 2 s reply
the slots had stood idle about 2% of the time. The cost is that a waiting proposal's parent
and prompt were chosen up to one reply earlier, like a child's that waits in the
evaluation queue.
"""

from __future__ import annotations

import gc
import math
import pickle
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import ray
from ray import cloudpickle
from ray.actor import ActorHandle
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from evolve.fair_slots import FairSlots, SlotsClosed
from evolve.llm import LLMCall
from evolve.llm.circuit import SharedCircuits, State
from evolve.llm.client import preload
from evolve.llm.config import Provider
from evolve.llm.hooks import CallHooks, CallSink
from evolve.llm.records import Status
from evolve.mutators import MutationRequest, Mutator, Proposal
from evolve.proposal_making import MutationFailed, make_proposal
from evolve.secrets import Keys
from evolve.service_host import HostedServices, RemoteLedger, ServicePlan

if TYPE_CHECKING:  # the driver's side of the services, which these actors never use
    from evolve.services import RunServices

THREADS = 32  # proposals one actor works on at once (as many again wait in it)


@ray.remote(
    num_cpus=0,
    max_restarts=-1,
    concurrency_groups={"ledger": 1, "reserve": 1, "circuits": 1, "control": 1},
)
class ProposalWorker:
    def __init__(
        self,
        mutators: bytes,
        services: ServicePlan | ActorHandle | None,
        providers: Sequence[Provider],
        running: int,
    ) -> None:
        """`mutators` pickled, unpickled once per thread; `services`, what this worker
        opens if it hosts the run's services, or the worker that does; `providers`, those
        of the task's models, whose SDKs (a second or more each) load now, while the
        evaluation workers set up and the seed is evaluated, and not on the first
        proposal; `running`, the proposals it works on at once (the others wait)."""
        self.pickled = mutators
        self.slots = FairSlots(running)
        self.local = threading.local()
        self.hosted: HostedServices | None = None
        self.sink: CallSink | None = None
        self.circuits: SharedCircuits | None = None
        if isinstance(services, ServicePlan):
            self.hosted = services.open()
            self.sink, self.circuits = self.hosted, self.hosted.shared_circuits()
        elif services is not None:
            self.sink, self.circuits = RemoteLedger(services), SharedCircuits.reaching(services)
        preload(providers)
        # Ray, the SDKs and the store live as long as the worker: kept out of the
        # collector's sight, as in the driver (evolve/engine.py), a full collection does
        # not stall every proposal in flight.
        gc.freeze()

    def propose(
        self, name: str, request: MutationRequest, keys: Keys, proposal_id: int, model_made: bool
    ) -> Proposal | MutationFailed:
        mine: dict[str, Mutator] | None = getattr(self.local, "mutators", None)
        if mine is None:
            mine = self.local.mutators = pickle.loads(self.pickled)
        hooks = CallHooks(proposal_id)
        if model_made:
            hooks = CallHooks(proposal_id, sink=self.sink, gate=self.circuits)
        try:
            with self.slots:
                return make_proposal(mine[name], request, keys, hooks)
        except SlotsClosed:
            return MutationFailed("the run stopped before it was sent", outcome="interrupted")

    @ray.method(concurrency_group="control")
    def stop(self) -> None:
        """The run stops: proposals still waiting for a slot end unsent."""
        self.slots.close()

    @ray.method(concurrency_group="control")
    def flushed(self, timeout_s: float) -> int:
        """Waits for the calls this worker sent to the host's ledger (see RemoteLedger);
        how many were still unconfirmed when `timeout_s` ran out."""
        return self.sink.flush(timeout_s) if isinstance(self.sink, RemoteLedger) else 0

    # The hosted services, for the other proposal workers and the driver. Each part has a
    # thread of its own, beside the proposals' threads.

    @ray.method(concurrency_group="ledger")
    def record(self, proposal_id: int, call: LLMCall) -> None:
        self._hosted().record(proposal_id, call)

    @ray.method(concurrency_group="reserve")
    def reserve(self, proposal_id: int, call: LLMCall) -> str:
        return self._hosted().reserve(proposal_id, call)

    @ray.method(concurrency_group="ledger")
    def drained(self) -> None:
        """Answers once every write queued before it is done."""
        self._hosted().drained()

    @ray.method(concurrency_group="circuits")
    def ask(self, key: str) -> tuple[float, State]:
        return self._hosted().ask(key)

    @ray.method(concurrency_group="circuits")
    def report(self, key: str, status: Status, retry_after: float | None = None) -> None:
        self._hosted().report(key, status, retry_after)

    @ray.method(concurrency_group="circuits")
    def status(self) -> dict[str, str]:
        return self._hosted().status()

    def _hosted(self) -> HostedServices:
        if self.hosted is None:
            raise RuntimeError("this proposal worker hosts no services")
        return self.hosted


NO_MUTATORS = cloudpickle.dumps({})


def start_worker(
    mutators: bytes,
    services: ServicePlan | ActorHandle | None,
    providers: Sequence[Provider],
    running: int = THREADS,
) -> ActorHandle:
    """A proposal worker (see ProposalWorker) that works on `running` proposals at once and
    holds as many waiting, a thread each; one that hosts the run's services runs on this,
    the driver's, node."""
    options: dict[str, object] = {"max_concurrency": 2 * running}
    if isinstance(services, ServicePlan):
        here = ray.get_runtime_context().get_node_id()
        options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=here, soft=False)
    return ProposalWorker.options(**options).remote(mutators, services, providers, running)  # type: ignore[attr-defined]


class ProposalWorkers:
    """Enough actors for `running` proposals at once and as many waiting, the slots shared
    out among them, each proposal sent to the one with the most slots to spare. In a run with
    models, the first hosts the run's services."""

    def __init__(
        self,
        mutators: Mapping[str, Mutator],
        running: int,
        services: RunServices,
        providers: Sequence[Provider],
    ) -> None:
        self.wanted = bool(mutators)
        self.pickled = cloudpickle.dumps(dict(mutators))  # a task's own classes by value
        self.services = services
        self.providers = tuple(providers)
        self.capacity = 2 * running  # proposals in flight: running, and waiting for a slot
        count = max(1, math.ceil(running / THREADS))
        self.shares = [running // count + (i < running % count) for i in range(count)]
        self.actors: list[ActorHandle] = []
        self.stopped = False
        self.busy: dict[ray.ObjectRef, ActorHandle] = {}

    def start(self) -> None:
        """Ask Ray for the actors, without waiting: they start while the seed is evaluated,
        not after it. A run whose proposals are all made in the driver needs none."""
        if self.actors or not self.wanted:
            return
        plan = self.services.plan
        first = start_worker(self.pickled, plan, self.providers, self.shares[0])
        if plan is not None:
            self.services.host = first
        others = first if plan is not None else None
        self.actors = [first] + [
            start_worker(self.pickled, others, self.providers, share) for share in self.shares[1:]
        ]

    def submit(
        self, name: str, request: MutationRequest, keys: Keys, proposal_id: int, model_made: bool
    ) -> ray.ObjectRef:
        """`model_made`: the proposal's model calls go to the run's ledger and circuits."""
        self.start()
        spare = {id(actor): share for actor, share in zip(self.actors, self.shares, strict=True)}
        for actor in self.busy.values():
            spare[id(actor)] -= 1
        actor = max(self.actors, key=lambda a: spare[id(a)])
        ref = actor.propose.remote(name, request, keys, proposal_id, model_made)
        self.busy[ref] = actor
        return ref

    def done(self, ref: ray.ObjectRef) -> None:
        self.busy.pop(ref, None)

    def stop(self) -> None:
        """Proposals waiting in the actors for a slot come back unsent (see FairSlots)."""
        if not self.stopped:
            self.stopped = True
            for actor in self.actors:
                actor.stop.remote()

    def close(self) -> None:
        """Proposals still running are abandoned with their actors, once the ledger has
        written the calls it was sent, from this worker and the others. Those waiting for a
        slot are turned away first: one let through while the ledger drains would start
        paid calls that the drain may not wait for."""
        self.stop()
        self.services.drain(self.actors[1:])
        for actor in self.actors:
            ray.kill(actor)
        self.actors, self.busy = [], {}
