"""A run on a Ray cluster (`evolve run --ray-address`): the workers of evolve/engine/workers.py,
evolve/propose/workers.py and evolve/propose/store_reader.py as Ray actors, placed on the
cluster's nodes. Ray is started or joined by evolve/runtime/cluster.py.

An evaluation worker takes one CPU of its node. Proposal workers take none (a slow model
never holds an evaluation slot idle), Ray restarts one that dies, and each runs its parts
on threads of their own: proposals, and for the first one the run's services (ledger,
reservations, circuits), which the others reach through Ray
(evolve/executors/ray_services.py). The first proposal worker and the store reader live
on the driver's node, which outlives every worker and holds a SQLite store.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import cloudpickle
import ray
from ray.actor import ActorHandle
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from evolve.engine.workers import EvaluationWorker
from evolve.executors import Actor, Executor, WorkerLost
from evolve.executors.ray_services import RemoteLedger, reaching
from evolve.llm import LLMCall
from evolve.llm.circuit import State
from evolve.llm.config import Provider
from evolve.llm.records import Status
from evolve.mutators import Mutator
from evolve.plugin.evaluator import Evaluator
from evolve.propose.service_host import ServicePlan
from evolve.propose.store_reader import StoreReader
from evolve.propose.workers import THREADS, ProposalWorker, Reached
from evolve.runtime import cluster
from evolve.task.schema import SandboxSpec


@ray.remote(num_cpus=1)
class RayEvaluationWorker(EvaluationWorker):
    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()


@ray.remote(
    num_cpus=0,
    max_restarts=-1,
    concurrency_groups={"ledger": 1, "reserve": 1, "circuits": 1, "control": 1},
)
class RayProposalWorker(ProposalWorker):
    """Each part of the hosted services has a thread of its own, beside the proposals'."""

    @ray.method(concurrency_group="control")
    def stop(self) -> None:
        super().stop()

    @ray.method(concurrency_group="control")
    def flushed(self, timeout_s: float) -> int:
        return super().flushed(timeout_s)

    @ray.method(concurrency_group="ledger")
    def record(self, proposal_id: int, call: LLMCall) -> None:
        super().record(proposal_id, call)

    @ray.method(concurrency_group="reserve")
    def reserve(self, proposal_id: int, call: LLMCall) -> str:
        return super().reserve(proposal_id, call)

    @ray.method(concurrency_group="ledger")
    def drained(self) -> None:
        super().drained()

    @ray.method(concurrency_group="circuits")
    def ask(self, key: str) -> tuple[float, State]:
        return super().ask(key)

    @ray.method(concurrency_group="circuits")
    def report(self, key: str, status: Status, retry_after: float | None = None) -> None:
        super().report(key, status, retry_after)

    @ray.method(concurrency_group="circuits")
    def status(self) -> dict[str, str]:
        return super().status()


@ray.remote(num_cpus=0)
class RayStoreReader(StoreReader):
    pass


def start_proposal_worker(
    mutators: Mapping[str, Mutator],
    services: ServicePlan | ActorHandle | None,
    providers: Sequence[Provider],
    running: int = THREADS,
) -> ActorHandle:
    """A proposal worker that works on `running` proposals at once and holds as many
    waiting, a thread each: the host of the run's services (`services` a plan: on this, the
    driver's, node), or a worker that reaches the host (`services` its handle), or one for a
    run without models (None)."""
    # A task's own classes travel by value.
    copies = functools.partial(cloudpickle.loads, cloudpickle.dumps(dict(mutators)))
    options: dict[str, object] = {"max_concurrency": 2 * running}
    reached: ServicePlan | Reached | None = None
    if isinstance(services, ServicePlan):
        options["scheduling_strategy"] = _here()
        reached = services
    elif services is not None:
        reached = (RemoteLedger(services), reaching(services))
    worker = RayProposalWorker.options(**options)  # type: ignore[attr-defined]
    return worker.remote(copies, reached, providers, running)


class RayActor(Actor):
    def __init__(self, name: str, handle: ActorHandle) -> None:
        self.name, self.handle = name, handle

    def call(self, method: str, *args: Any) -> Future[Any]:
        return _answer(getattr(self.handle, method).remote(*args))

    def kill(self) -> None:
        ray.kill(self.handle, no_restart=True)


def _answer(ref: ray.ObjectRef) -> Future[Any]:
    """The call's future, with Ray's word for an actor that is gone or could not be placed
    made WorkerLost."""
    answer: Future[Any] = Future()

    def settle(done: Future[Any]) -> None:
        try:
            answer.set_result(done.result())
        except RayError as exc:
            answer.set_exception(WorkerLost(str(exc)))
        except BaseException as exc:
            answer.set_exception(exc)

    ref.future().add_done_callback(settle)
    return answer


def _here() -> NodeAffinitySchedulingStrategy:
    return NodeAffinitySchedulingStrategy(
        node_id=ray.get_runtime_context().get_node_id(), soft=False
    )


class RayExecutor(Executor):
    kind = "ray"

    def evaluation_worker(self, evaluator: Evaluator, sandbox: SandboxSpec, name: str) -> Actor:
        return RayActor(name, RayEvaluationWorker.remote(evaluator, sandbox, name))  # type: ignore[attr-defined]

    def proposal_workers(
        self,
        mutators: Mapping[str, Mutator],
        plan: ServicePlan | None,
        providers: Sequence[Provider],
        shares: Sequence[int],
    ) -> list[Actor]:
        first_share, *other_shares = shares
        first = start_proposal_worker(mutators, plan, providers, first_share)
        actors = [RayActor("proposals-0", first)]
        for i, share in enumerate(other_shares, 1):
            other = start_proposal_worker(mutators, plan and first, providers, share)
            actors.append(RayActor(f"proposals-{i}", other))
        return actors

    def proposal_shares(self, running: int) -> list[int]:
        count = max(1, math.ceil(running / THREADS))
        return [running // count + (i < running % count) for i in range(count)]

    def store_reader(self, url: str, run_name: str) -> Actor:
        reader = RayStoreReader.options(scheduling_strategy=_here())  # type: ignore[attr-defined]
        return RayActor("store-reader", reader.remote(url, run_name))

    def cpus(self) -> int:
        return int(ray.cluster_resources().get("CPU", 1))

    def free_cpus(self) -> int:
        return int(ray.available_resources().get("CPU", 0))

    def logs_folder(self) -> str | None:
        return cluster.logs_folder()

    def close(self) -> None:
        """Nothing here: a local instance is cleaned up as it shuts down
        (evolve/runtime/cluster.py), and a joined cluster's nodes reap what their own workers
        leave."""
