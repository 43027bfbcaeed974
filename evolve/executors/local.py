"""A run on this machine alone, without Ray: what `evolve run` uses unless it is given a
cluster to join.

Each evaluation worker is a child process of the driver (evolve/executors/process_actor.py):
a worker that hangs or dies is killed and replaced without harm to the run, and it never
holds a model key. The proposal workers and the agent's store reader are threads of the
driver: a proposal spends its time waiting on a model's reply, and in the driver's process
its calls reach the run's ledger and circuits directly. Their threads are daemons, so a
run that stops does not wait for a model reply it no longer wants (its call was written
to the ledger before it was sent: evolve/propose/service_host.py).
"""

from __future__ import annotations

import copy
import functools
import logging
import os
import queue
import subprocess
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evolve.executors import Actor, Executor, WorkerLost
from evolve.executors.process_actor import ProcessActor
from evolve.plugin.sandbox import backend

if TYPE_CHECKING:
    from evolve.llm.config import Provider
    from evolve.mutators import Mutator
    from evolve.plugin.evaluator import Evaluator
    from evolve.propose.service_host import ServicePlan
    from evolve.task.schema import SandboxSpec

log = logging.getLogger("evolve.executors")

EXIT_WAIT_S = 10.0  # for a killed worker to be gone


class ThreadActor(Actor):
    """An object, built by `build` on a thread of its own (a proposal worker loads the model
    SDKs, a second or more, while the seed is evaluated), whose methods then run on
    `threads` daemon threads of this process. Calls made meanwhile wait for it."""

    def __init__(self, name: str, build: Callable[[], object], threads: int) -> None:
        self.name = name
        self.target: object = None
        self.jobs: queue.SimpleQueue[tuple[Future[Any], str, tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self.stopped: str | None = None  # why calls are turned away, once they are
        self.threads = threads
        threading.Thread(target=self._start, args=(build,), name=name, daemon=True).start()

    def call(self, method: str, *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        if self.stopped is not None:
            future.set_exception(WorkerLost(self.stopped))
        else:
            self.jobs.put((future, method, args))
        return future

    def kill(self) -> None:
        """Calls not yet started end WorkerLost; those running finish unheard."""
        self.stopped = f"{self.name} was stopped"
        for _ in range(self.threads):
            self.jobs.put(None)

    def _start(self, build: Callable[[], object]) -> None:
        try:
            self.target = build()
        except Exception as exc:
            log.exception("%s could not start", self.name)
            self.stopped = f"{self.name} could not start: {type(exc).__name__}: {exc}"
        for i in range(self.threads):
            threading.Thread(target=self._work, name=f"{self.name}-{i}", daemon=True).start()

    def __deepcopy__(self, memo: dict[int, Any]) -> ThreadActor:
        """Each proposal thread's copy of the mutators shares the one actor (the reader)."""
        return self

    def _work(self) -> None:
        while (job := self.jobs.get()) is not None:
            future, method, args = job
            if self.stopped is not None:
                future.set_exception(WorkerLost(self.stopped))
                continue
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(getattr(self.target, method)(*args))
            except BaseException as exc:  # the caller's to judge
                future.set_exception(exc)


class LocalExecutor(Executor):
    kind = "local"

    def __init__(self, log_folder: Path, withhold: Collection[str] = ()) -> None:
        """What the evaluation workers print goes to `log_folder`/workers.log; they start
        with neither the secrets nor `withhold` (the task's model keys) in their
        environment."""
        self.log_file = log_folder / "workers.log"
        self.withhold = tuple(withhold)
        self.processes: list[ProcessActor] = []
        self.backends: set[str] = set()  # of the sandboxes the workers open

    def evaluation_worker(self, evaluator: Evaluator, sandbox: SandboxSpec, name: str) -> Actor:
        from evolve.engine.workers import EvaluationWorker

        self.processes = [p for p in self.processes if p.gone is None]
        self.backends.add(sandbox.backend)
        arguments = (evaluator, sandbox, name)
        actor = ProcessActor(name, EvaluationWorker, arguments, self.log_file, self.withhold)
        self.processes.append(actor)
        return actor

    def proposal_workers(
        self,
        mutators: Mapping[str, Mutator],
        plan: ServicePlan | None,
        providers: Sequence[Provider],
        shares: Sequence[int],
    ) -> list[Actor]:
        from evolve.propose.workers import ProposalWorker

        (running,) = shares
        copies = functools.partial(copy.deepcopy, dict(mutators))
        build = functools.partial(ProposalWorker, copies, plan, providers, running)
        return [ThreadActor("proposals", build, 2 * running + 1)]

    def proposal_shares(self, running: int) -> list[int]:
        return [running]  # one set of threads holds any number of proposals

    def store_reader(self, url: str, run_name: str) -> Actor:
        from evolve.propose.store_reader import StoreReader

        return ThreadActor("store-reader", functools.partial(StoreReader, url, run_name), 4)

    def cpus(self) -> int:
        return len(os.sched_getaffinity(0))

    def free_cpus(self) -> int:
        alive = sum(p.gone is None and not p.killed for p in self.processes)
        return max(0, self.cpus() - alive)

    def logs_folder(self) -> str | None:
        return str(self.log_file)

    def close(self) -> None:
        """Once every worker has exited, what their sandboxes left is removed: a worker
        killed in the middle of a job (the run stopped, or the job hung) leaves its
        container, which counts as owned until the worker is gone. Only the backends the
        workers used are looked at (the guardian looks at every one)."""
        for actor in self.processes:
            actor.kill()
        for actor in self.processes:
            try:
                actor.process.wait(EXIT_WAIT_S)
            except subprocess.TimeoutExpired:
                log.warning("%s did not exit %g s after SIGKILL", actor.name, EXIT_WAIT_S)
        self.processes = []
        for name in sorted(self.backends):
            backend(name).reap_orphans()
