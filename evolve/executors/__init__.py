"""Where a run's workers live: the evaluation workers, the proposal workers and the agent's
store reader, each an actor whose methods are called from the driver and answer with a
`concurrent.futures.Future`.

Two executors hold them. The local one (evolve/executors/local.py) runs a run on this
machine alone: each evaluation worker is a child process of the driver, the proposal
workers and the store reader are threads in it, and Ray is not imported. The Ray one
(evolve/executors/on_ray.py) starts or joins a Ray cluster and places the same classes as
Ray actors on its nodes. The loop (evolve/engine/loop.py), the pool, the dispatcher and the
proposer see only what is here: actors, futures and `WorkerLost`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evolve.llm.config import Provider
    from evolve.mutators import Mutator
    from evolve.plugin.evaluator import Evaluator
    from evolve.propose.service_host import ServicePlan
    from evolve.task.schema import SandboxSpec


class WorkerLost(RuntimeError):
    """The actor that was to answer is gone: it died, was killed, or could not be started."""


class Actor(ABC):
    """A worker the driver calls: `call` starts one of its methods and returns at once."""

    name: str

    @abstractmethod
    def call(self, method: str, *args: Any) -> Future[Any]:
        """The method's answer, or WorkerLost when the actor is gone before it answers."""

    @abstractmethod
    def kill(self) -> None:
        """Stop the actor at once; what it was asked and has not answered ends WorkerLost."""


class Executor(ABC):
    """Starts and stops a run's actors."""

    kind: str  # "local" or "ray", for the log

    @abstractmethod
    def evaluation_worker(self, evaluator: Evaluator, sandbox: SandboxSpec, name: str) -> Actor:
        """An evolve.engine.workers.EvaluationWorker, which takes one CPU of its node."""

    @abstractmethod
    def proposal_workers(
        self,
        mutators: Mapping[str, Mutator],
        plan: ServicePlan | None,
        providers: Sequence[Provider],
        shares: Sequence[int],
    ) -> list[Actor]:
        """One evolve.propose.workers.ProposalWorker per share of the model slots, the
        first hosting the run's services (`plan`), each thread with its own copy of
        `mutators`."""

    @abstractmethod
    def proposal_shares(self, running: int) -> list[int]:
        """How `running` proposals at once are shared out among proposal workers."""

    @abstractmethod
    def store_reader(self, url: str, run_name: str) -> Actor:
        """An evolve.propose.store_reader.StoreReader on the driver's node."""

    @abstractmethod
    def cpus(self) -> int:
        """CPUs there are for evaluation workers, in all."""

    @abstractmethod
    def free_cpus(self) -> int:
        """CPUs no actor holds now."""

    @abstractmethod
    def logs_folder(self) -> str | None:
        """Where what the workers print is kept."""

    @abstractmethod
    def close(self) -> None:
        """After the run: what its workers left behind is cleaned up."""


def ready(futures: Collection[Future[Any]], timeout_s: float) -> list[Future[Any]]:
    """Those of `futures` that are done, waiting up to `timeout_s` for the first."""
    if not futures:
        return []
    wait(futures, timeout=timeout_s, return_when=FIRST_COMPLETED)
    return [future for future in futures if future.done()]
