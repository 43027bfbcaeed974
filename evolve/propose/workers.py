"""Where model proposals run: a few long-lived workers (evolve/executors/), each answering
many proposals at once on threads of its own.

A proposal spends its time waiting on a model's HTTP reply, so a worker keeps its mutators
and works on many at once: its threads share one SDK client per endpoint and key, whose
connections last from one proposal to the next (evolve/llm/client.py). Each thread has
copies of the mutators of its own: they were written for one proposal at a time (an
agent's evaluator), and copies share no state.

On one machine the worker is threads of the driver (evolve/executors/local.py); on a Ray
cluster, actors that take no CPU slot, so a slow model never holds an evaluation slot idle,
and that Ray restarts when one dies (its proposals in flight come back as lost, and are
settled so). They end with the run. The first one hosts the run's services, its ledger
writer and circuits (evolve/propose/service_host.py), on the driver's node, which outlives every
worker and holds a SQLite store; the others reach them through Ray
(evolve/executors/ray_services.py).

Each worker works on a set number of proposals at once, its share of the run's model slots;
the driver sends as many again, which wait in the worker for a slot (evolve/engine/fair_slots.py).
A reply frees its slot for a waiting proposal at once, not after a trip through the driver
and the store, which takes longest when a burst of replies arrives together. The cost is
that a waiting proposal's parent and prompt were chosen up to one reply earlier, like a
child's that waits in the evaluation queue.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from evolve.engine.fair_slots import FairSlots, SlotsClosed
from evolve.executors import Actor, Executor
from evolve.llm import LLMCall
from evolve.llm.circuit import SharedCircuits, State
from evolve.llm.client import preload
from evolve.llm.config import Provider
from evolve.llm.hooks import CallHooks, CallSink
from evolve.llm.records import Status
from evolve.mutators import MutationRequest, Mutator, Proposal
from evolve.plugin.secrets import Keys
from evolve.propose.making import MutationFailed, make_proposal
from evolve.propose.service_host import HostedServices, ServicePlan

if TYPE_CHECKING:  # the driver's side of the services, which these workers never use
    from evolve.propose.services import RunServices

THREADS = 32  # proposals one Ray actor works on at once (as many again wait in it)

# What a worker that does not host the run's services is given instead: a sink for its
# calls and the circuits, both reaching the host (evolve/executors/ray_services.py).
Reached = tuple[CallSink, SharedCircuits]


class ProposalWorker:
    def __init__(
        self,
        copies: Callable[[], Mapping[str, Mutator]],
        services: ServicePlan | Reached | None,
        providers: Sequence[Provider],
        running: int,
    ) -> None:
        """`copies` makes a thread's own mutators; `services`, what this worker opens if it
        hosts the run's services, or how it reaches the worker that does; `providers`,
        those of the task's models, whose SDKs (a second or more each) load now, while the
        evaluation workers set up and the seed is evaluated, and not on the first proposal;
        `running`, the proposals it works on at once (the others wait)."""
        self.copies = copies
        self.slots = FairSlots(running)
        self.local = threading.local()
        self.hosted: HostedServices | None = None
        self.sink: CallSink | None = None
        self.circuits: SharedCircuits | None = None
        if isinstance(services, ServicePlan):
            self.hosted = services.open()
            self.sink, self.circuits = self.hosted, self.hosted.shared_circuits()
        elif services is not None:
            self.sink, self.circuits = services
        preload(providers)
        # The SDKs and the store live as long as the worker: kept out of the collector's
        # sight, as in the driver (evolve/engine/loop.py), a full collection does not stall
        # every proposal in flight.
        gc.freeze()

    def propose(
        self, name: str, request: MutationRequest, keys: Keys, proposal_id: int, model_made: bool
    ) -> Proposal | MutationFailed:
        mine: Mapping[str, Mutator] | None = getattr(self.local, "mutators", None)
        if mine is None:
            mine = self.local.mutators = self.copies()
        hooks = CallHooks(proposal_id)
        if model_made:
            hooks = CallHooks(proposal_id, sink=self.sink, gate=self.circuits)
        try:
            with self.slots:
                return make_proposal(mine[name], request, keys, hooks)
        except SlotsClosed:
            return MutationFailed("the run stopped before it was sent", outcome="interrupted")

    def stop(self) -> None:
        """The run stops: proposals still waiting for a slot end unsent."""
        self.slots.close()

    def flushed(self, timeout_s: float) -> int:
        """Waits for the calls this worker sent to the host's ledger; how many were still
        unconfirmed when `timeout_s` ran out (evolve/executors/ray_services.py)."""
        flush: Callable[[float], int] | None = getattr(self.sink, "flush", None)
        return 0 if self.hosted is not None or flush is None else flush(timeout_s)

    # The hosted services, for the other proposal workers and the driver.

    def record(self, proposal_id: int, call: LLMCall) -> None:
        self._hosted().record(proposal_id, call)

    def reserve(self, proposal_id: int, call: LLMCall) -> str:
        return self._hosted().reserve(proposal_id, call)

    def drained(self) -> None:
        """Answers once every write queued before it is done."""
        self._hosted().drained()

    def ask(self, key: str) -> tuple[float, State]:
        return self._hosted().ask(key)

    def report(self, key: str, status: Status, retry_after: float | None = None) -> None:
        self._hosted().report(key, status, retry_after)

    def status(self) -> dict[str, str]:
        return self._hosted().status()

    def _hosted(self) -> HostedServices:
        if self.hosted is None:
            raise RuntimeError("this proposal worker hosts no services")
        return self.hosted


class ProposalWorkers:
    """Enough workers for `running` proposals at once and as many waiting, the slots shared
    out among them (evolve/executors/ decides how), each proposal sent to the one with the
    most slots to spare. In a run with models, the first hosts the run's services."""

    def __init__(
        self,
        mutators: Mapping[str, Mutator],
        running: int,
        services: RunServices,
        providers: Sequence[Provider],
        executor: Executor,
    ) -> None:
        self.mutators = dict(mutators)
        self.services = services
        self.providers = tuple(providers)
        self.executor = executor
        self.capacity = 2 * running  # proposals in flight: running, and waiting for a slot
        self.shares = executor.proposal_shares(running)
        self.actors: list[Actor] = []
        self.stopped = False
        self.busy: dict[Future[Any], Actor] = {}

    def start(self) -> None:
        """Start the workers, without waiting: they start while the seed is evaluated, not
        after it. A run whose proposals are all made in the driver needs none."""
        if self.actors or not self.mutators:
            return
        plan = self.services.plan
        self.actors = self.executor.proposal_workers(
            self.mutators, plan, self.providers, self.shares
        )
        if plan is not None:
            self.services.host = self.actors[0]

    def submit(
        self, name: str, request: MutationRequest, keys: Keys, proposal_id: int, model_made: bool
    ) -> Future[Any]:
        """`model_made`: the proposal's model calls go to the run's ledger and circuits."""
        self.start()
        spare = {id(actor): share for actor, share in zip(self.actors, self.shares, strict=True)}
        for actor in self.busy.values():
            spare[id(actor)] -= 1
        actor = max(self.actors, key=lambda a: spare[id(a)])
        future = actor.call("propose", name, request, keys, proposal_id, model_made)
        self.busy[future] = actor
        return future

    def done(self, future: Future[Any]) -> None:
        self.busy.pop(future, None)

    def stop(self) -> None:
        """Proposals waiting in the workers for a slot come back unsent (see FairSlots)."""
        if not self.stopped:
            self.stopped = True
            for actor in self.actors:
                actor.call("stop")

    def close(self) -> None:
        """Proposals still running are abandoned with their workers, once the ledger has
        written the calls it was sent, from this worker and the others. Those waiting for a
        slot are turned away first: one let through while the ledger drains would start
        paid calls that the drain may not wait for."""
        self.stop()
        self.services.drain(self.actors[1:])
        for actor in self.actors:
            actor.kill()
        self.actors, self.busy = [], {}
