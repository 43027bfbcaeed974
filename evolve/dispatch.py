"""Keeping the evaluation workers busy, and hiding their troubles from the loop.

Jobs wait in a queue for an idle worker; a job may ask for a machine kind (a
re-measurement, so that a candidate's measurements compare like with like) or to avoid a
worker (the seed's retry), and waits for a worker that suits it while other jobs go ahead.
What is nobody's verdict on the candidate is dealt with here: a worker that died is
replaced (without waiting for the replacement) and its job retried, a sandbox that is down
holds its job until it is back, and a worker past the watchdog's deadline is killed and
replaced, its candidate timed out. The loop receives only results to record.
"""

from __future__ import annotations

import random
import time
from collections import deque
from dataclasses import dataclass, replace

import ray
from ray.actor import ActorHandle
from ray.exceptions import RayActorError

from evolve.events import Event, EventLog
from evolve.outage import Outage
from evolve.pool import WorkerPool
from evolve.results import ERROR, TIMEOUT, UNAVAILABLE, EvalResult
from evolve.store import CandidateRecord
from evolve.watchdog import Watchdog
from evolve.workers import Finished

MAX_ATTEMPTS = 3  # evaluations lost to a dead worker are retried this often, then recorded


@dataclass(frozen=True)
class Job:
    candidate: CandidateRecord
    kind: str  # "evaluate" or "remeasure"
    attempt: int = 1
    input_seed: int = 0  # drawn when the job is submitted
    avoid: str | None = None  # a worker's name: run elsewhere if another worker can
    cpu: str | None = None  # run on this machine kind if a worker of it is alive


class Dispatcher:
    def __init__(
        self, pool: WorkerPool, watchdog: Watchdog[ray.ObjectRef], events: EventLog
    ) -> None:
        self.pool, self.watchdog, self.events = pool, watchdog, events
        self.outage = Outage()
        self.queue: deque[Job] = deque()
        self.in_flight: dict[ray.ObjectRef, tuple[Job, ActorHandle]] = {}

    def add(self, job: Job, *, first: bool = False) -> None:
        """`first` for a job that should not wait behind new candidates: a re-measurement."""
        if first:
            self.queue.appendleft(job)
        else:
            self.queue.append(job)

    def idle(self) -> bool:
        return not self.queue and not self.in_flight

    def submit(self, rng: random.Random) -> None:
        waiting: list[Job] = []  # jobs that no idle worker suits, kept in their order
        while self.queue and self.pool.idle and self.outage.may_submit():
            job = self.queue.popleft()
            actor = self.pool.take(avoid=job.avoid, cpu=job.cpu)
            if actor is None:
                waiting.append(job)
                continue
            job = replace(job, input_seed=rng.getrandbits(63))
            ref = actor.evaluate.remote(job.candidate.program, job.input_seed)
            self.in_flight[ref] = (job, actor)
            self.watchdog.watch(ref)
        self.queue.extendleft(reversed(waiting))

    def finish(self, ref: ray.ObjectRef) -> tuple[Job, Finished] | None:
        """The result to record, or None when the job went back to the queue."""
        job, actor = self.in_flight.pop(ref)
        self.watchdog.forget(ref)
        try:
            finished: Finished = ray.get(ref)
        except RayActorError as exc:
            self.pool.replace(actor)
            if job.attempt < MAX_ATTEMPTS:
                text = f"worker died during #{job.candidate.id}; retrying"
                self.events.emit(Event("warning", text))
                self.add(replace(job, attempt=job.attempt + 1), first=True)
                return None
            now = time.time()
            why = f"the evaluation worker died {MAX_ATTEMPTS} times: {exc}"
            return job, Finished(EvalResult(ERROR, feedback=why), now, now, "lost")
        self.pool.give_back(actor)
        if finished.result.status == UNAVAILABLE:  # not the candidate's fault: it waits
            self.outage.down()
            self.add(job, first=True)
            text = f"sandbox unavailable, retrying #{job.candidate.id}: {finished.result.feedback}"
            self.events.emit(Event("warning", text))
            return None
        self.outage.up()
        return job, finished

    def overdue(self) -> list[tuple[Job, Finished]]:
        """Workers past the deadline are lost, stopped or stuck: each is killed and replaced,
        and its candidate timed out (not retried: it would hang the next worker too)."""
        timed_out = []
        for ref in self.watchdog.overdue():
            job, actor = self.in_flight.pop(ref)
            self.watchdog.forget(ref)
            text = f"#{job.candidate.id}: evaluation past its deadline"
            self.events.emit(Event("warning", text))
            self.pool.replace(actor)
            now = time.time()
            result = EvalResult(TIMEOUT, feedback=self.watchdog.feedback())
            started = now - self.watchdog.deadline_s
            timed_out.append((job, Finished(result, started, now, "killed")))
        return timed_out
