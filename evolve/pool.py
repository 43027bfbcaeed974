"""The evaluation workers of one run: started together, each set up with the seed, handed
out one job at a time, replaced when lost, and closed at the end."""

from __future__ import annotations

import logging

import ray
from ray.actor import ActorHandle

from evolve.evaluator import Evaluator
from evolve.program import Program
from evolve.task import SandboxSpec
from evolve.workers import EvaluationWorker

log = logging.getLogger("evolve.pool")

CLOSE_TIMEOUT_S = 10.0  # for workers to remove their containers at the end of a run


class SetupFailed(RuntimeError):
    """The evaluator could not be set up on the workers (a missing GPU or tool, a broken
    seed): nothing can be evolved until the machine or the task changes."""


class WorkerPool:
    def __init__(
        self, evaluator: Evaluator, sandbox: SandboxSpec, seed: Program, size: int
    ) -> None:
        self.evaluator, self.sandbox, self.seed, self.size = evaluator, sandbox, seed, size
        self.idle: list[ActorHandle] = []
        self.busy: set[ActorHandle] = set()

    def start(self) -> None:
        """Raises SetupFailed, with every distinct error, if any worker fails its set-up."""
        actors = [self._new(f"worker-{i}") for i in range(self.size)]
        errors = ray.get([a.prepare.remote(self.seed) for a in actors])
        problems = sorted({e for e in errors if e})
        if problems:
            raise SetupFailed("evaluator set-up failed on the workers: " + "; ".join(problems))
        self.idle = actors

    def take(self) -> ActorHandle | None:
        if not self.idle:
            return None
        actor = self.idle.pop()
        self.busy.add(actor)
        return actor

    def give_back(self, actor: ActorHandle) -> None:
        self.busy.discard(actor)
        self.idle.append(actor)

    def replace(self, dead: ActorHandle) -> None:
        """Kill first: a worker that hangs still holds its CPU, which its successor needs."""
        log.warning("replacing a lost or overdue evaluation worker")
        self.busy.discard(dead)
        ray.kill(dead, no_restart=True)
        actor = self._new("worker-r")
        error = ray.get(actor.prepare.remote(self.seed))
        if error:
            raise RuntimeError(f"a replacement worker failed its set-up: {error}")
        self.idle.append(actor)

    def stop(self) -> None:
        """Idle workers close their sandboxes first; busy ones (after Ctrl-C) die at once,
        and the next sandbox on this host reaps what they leave."""
        closing = [actor.close.remote() for actor in self.idle]
        ray.wait(closing, num_returns=len(closing), timeout=CLOSE_TIMEOUT_S)
        for actor in [*self.idle, *self.busy]:
            ray.kill(actor, no_restart=True)
        self.idle, self.busy = [], set()

    def _new(self, name: str) -> ActorHandle:
        return EvaluationWorker.remote(self.evaluator, self.sandbox, name)  # type: ignore[attr-defined]
