"""Keeping the evaluation workers busy, and hiding their troubles from the loop.

Jobs wait in a queue for a worker with room (below); a job may ask for a machine kind (a
re-measurement, so that a candidate's measurements compare like with like) or to avoid a
worker (the seed's retry), and waits for an idle worker that suits it while other jobs go
ahead.
What is nobody's verdict on the candidate is dealt with here: a worker that died is
replaced (without waiting for the replacement) and its job retried, a sandbox that is down
holds its job until it is back, and a worker past the watchdog's deadline is killed and
replaced, its candidate timed out. The loop receives only results to record.

While evaluations are fast (their recent durations average under QUEUE_BELOW_S), a busy
worker is given a second job, which waits in the worker and starts the moment the first
ends. Otherwise each finished job would leave its worker idle for the driver's turn:
recording the result, proposing, sending the next job, which with evaluations of a few
milliseconds is a large share of each worker's time (`bench/overhead.py --delay` measures
it); with slow ones it is noise, and a job held behind a slow one could wait longer than it
gains while another worker idles, so they go one at a time. Only a job that asks for no
particular worker is queued. The watchdog times the job a worker runs, not the one queued
behind it.

A worker lost while it held two jobs leaves it open which one was to blame: the first may
have finished with its reply still in the process when the second stopped or killed it.
So no verdict falls then: both go back to the queue to run alone (on an idle worker, with
nothing queued behind them), the first charged an attempt if the worker died, the second
not; whichever hangs or kills its worker again does it alone and gets the verdict. A
candidate cannot have another one recorded as timed out, at the cost of one more
deadline for a true hang among fast evaluations.
"""

from __future__ import annotations

import random
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any

from evolve.engine.events import Event, EventLog
from evolve.engine.outage import Outage
from evolve.engine.pool import WorkerPool
from evolve.engine.workers import Finished
from evolve.executors import Actor, WorkerLost
from evolve.plugin.results import ERROR, TIMEOUT, UNAVAILABLE, EvalResult
from evolve.plugin.watchdog import Watchdog
from evolve.store import CandidateRecord

MAX_ATTEMPTS = 3  # evaluations lost to a dead worker are retried this often, then recorded
QUEUE_BELOW_S = 0.5  # evaluations faster than this, on average, are queued two to a worker
RECENT = 0.2  # weight of the newest duration in the running average


@dataclass(frozen=True)
class Job:
    candidate: CandidateRecord
    kind: str  # "evaluate" or "remeasure"
    attempt: int = 1
    input_seed: int = 0  # drawn when the job is submitted
    avoid: str | None = None  # a worker's name: run elsewhere if another worker can
    cpu: str | None = None  # run on this machine kind if a worker of it is alive
    alone: bool = False  # on an idle worker, with nothing queued behind it (see above)


class Dispatcher:
    def __init__(self, pool: WorkerPool, watchdog: Watchdog[Future[Any]], events: EventLog) -> None:
        self.pool, self.watchdog, self.events = pool, watchdog, events
        self.outage = Outage()
        self.queue: deque[Job] = deque()
        self.in_flight: dict[Future[Any], tuple[Job, Actor]] = {}
        # Each busy worker's jobs in the order it runs them: the first is running.
        self.lines: dict[Actor, deque[Future[Any]]] = {}
        self.typical_s: float | None = None  # running average of evaluation durations

    def add(self, job: Job, *, first: bool = False) -> None:
        """`first` for a job that should not wait behind new candidates: a re-measurement."""
        if first:
            self.queue.appendleft(job)
        else:
            self.queue.append(job)

    def idle(self) -> bool:
        return not self.queue and not self.in_flight

    def fast(self) -> bool:
        """Whether evaluations are fast enough to queue a second job on a busy worker."""
        return self.typical_s is not None and self.typical_s < QUEUE_BELOW_S

    def submit(self, rng: random.Random) -> None:
        waiting: list[Job] = []  # jobs that no worker with room suits, kept in their order
        queue = self.fast()
        while self.queue and self.pool.has_room(queue=queue) and self.outage.may_submit():
            job = self.queue.popleft()
            actor = self.pool.take(
                avoid=job.avoid, cpu=job.cpu, queue=queue and not job.alone, alone=job.alone
            )
            if actor is None:
                # A job that waits for an idle worker (a re-measurement, the seed's retry)
                # gets the next one: nothing more is queued behind busy workers meanwhile,
                # or with fast evaluations none would ever be idle.
                waiting.append(job)
                queue = False
                continue
            job = replace(job, input_seed=rng.getrandbits(63))
            ref = actor.call("evaluate", job.candidate.program, job.input_seed)
            self.in_flight[ref] = (job, actor)
            line = self.lines.setdefault(actor, deque())
            line.append(ref)
            if len(line) == 1:  # it runs now; a queued job is watched once it does
                self.watchdog.watch(ref)
        self.queue.extendleft(reversed(waiting))

    def _ended(self, ref: Future[Any], actor: Actor) -> None:
        """`ref` left its worker's line; the job behind it, if any, runs from now."""
        self.watchdog.forget(ref)
        line = self.lines[actor]
        was_first = line[0] == ref
        line.remove(ref)
        if not line:
            del self.lines[actor]
        elif was_first:
            self.watchdog.watch(line[0])

    def _lost_with(self, actor: Actor, *, died: bool) -> Job | None:
        """The worker is gone (`died`, or killed past its deadline) and is replaced. The job
        it was running, to be judged, if it held no other; otherwise None, and its jobs go
        back to the queue, first and in their order, each to run alone (see above)."""
        line = self.lines.pop(actor)
        jobs = [self.in_flight.pop(ref)[0] for ref in line]
        for ref in line:
            self.watchdog.forget(ref)
        self.pool.replace(actor)
        if len(jobs) == 1:
            return jobs[0]
        running, *queued = jobs
        text = f"a worker holding #{running.candidate.id} and a job queued behind it was lost"
        self.events.emit(Event("warning", f"{text}; both run again, alone"))
        if died:
            running = replace(running, attempt=running.attempt + 1)
        for job in reversed([running, *queued]):
            self.add(replace(job, alone=True), first=True)
        return None

    def finish(self, ref: Future[Any]) -> tuple[Job, Finished] | None:
        """The result to record, or None when the job went back to the queue."""
        job, actor = self.in_flight[ref]
        try:
            finished: Finished = ref.result()
        except WorkerLost as exc:
            # Whichever of its jobs says so first: the worker ran the first of its line.
            lost = self._lost_with(actor, died=True)
            if lost is None:
                return None
            job = lost
            if job.attempt < MAX_ATTEMPTS:
                text = f"worker died during #{job.candidate.id}; retrying"
                self.events.emit(Event("warning", text))
                self.add(replace(job, attempt=job.attempt + 1), first=True)
                return None
            now = time.time()
            why = f"the evaluation worker died {MAX_ATTEMPTS} times: {exc}"
            return job, Finished(EvalResult(ERROR, feedback=why), now, now, "lost")
        del self.in_flight[ref]
        self._ended(ref, actor)
        self.pool.give_back(actor)
        if finished.result.ok:  # a failure, or a sandbox that is down, is often quick
            took = max(0.0, finished.finished_at - finished.started_at)
            self.typical_s = took if self.typical_s is None else (
                RECENT * took + (1 - RECENT) * self.typical_s
            )  # fmt: skip
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
            job = self._lost_with(self.in_flight[ref][1], died=False)  # the job it ran
            if job is None:
                continue
            text = f"#{job.candidate.id}: evaluation past its deadline"
            self.events.emit(Event("warning", text))
            now = time.time()
            result = EvalResult(TIMEOUT, feedback=self.watchdog.feedback())
            started = now - self.watchdog.deadline_s
            timed_out.append((job, Finished(result, started, now, "killed")))
        return timed_out
