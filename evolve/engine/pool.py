"""The evaluation workers of one run: started, set up with the seed, handed out jobs (one at
a time, or with a second queued behind it: see `take`), replaced when lost, and closed at
the end.

Nothing here waits on a worker. A worker is placed, then set up (its `prepare`, which may
build and time the seed, or build a corpus for minutes) while the loop goes on with the
workers it has; the loop hands the pool what finished through `started`, and calls `tend`
on every turn. A worker that is not placed START_DEADLINE_S after it was asked for
(the cluster has no free CPU for it) is given up, and its slot stays empty: the pool has
shrunk, and says so on the board and in the log. Every ROOM_POLL_S the pool asks the
executor (evolve/executors/) for free CPUs and fills empty slots as they appear, so it grows
back when nodes return.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import Any

from evolve.engine.events import Event, EventLog
from evolve.engine.workers import Placement
from evolve.executors import Actor, Executor, WorkerLost
from evolve.plugin.evaluator import Evaluator
from evolve.plugin.program import Program
from evolve.task.schema import SandboxSpec

log = logging.getLogger("evolve.engine.pool")

CLOSE_TIMEOUT_S = 10.0  # for workers to remove their containers at the end of a run
START_DEADLINE_S = 60.0  # for a new worker to be placed on a node with a free CPU
ROOM_POLL_S = 5.0  # how often a shrunk pool looks for free CPUs
RETRY_AFTER_FAILED_SETUP_S = 30.0  # a slot whose set-up failed waits this long, then doubles
MAX_RETRY_S = 600.0
DEPTH = 2  # jobs a worker holds at most: the one it runs, and one queued behind it


class SetupFailed(RuntimeError):
    """The evaluator could not be set up on any worker (a missing GPU or tool, a broken
    seed): nothing can be evolved until the machine or the task changes."""


@dataclass(frozen=True)
class Placing:
    """A worker asked for but not yet placed on a node."""

    actor: Actor
    name: str
    due: float  # time.monotonic() by which it must have been placed


class WorkerPool:
    def __init__(
        self,
        executor: Executor,
        evaluator: Evaluator,
        sandbox: SandboxSpec,
        seed: Program,
        size: int,
        events: EventLog,
    ) -> None:
        self.executor = executor
        self.evaluator, self.sandbox, self.seed, self.size = evaluator, sandbox, seed, size
        self.events = events
        self.idle: list[Actor] = []
        self.busy: dict[Actor, int] = {}  # a worker with jobs: how many (1 or DEPTH)
        self.one_job: dict[Actor, None] = {}  # busy with one job, oldest first
        self.workers: dict[Actor, Placement] = {}
        self.placing: dict[Future[Any], Placing] = {}
        # Placed workers running their set-up: no deadline, as a set-up may build a corpus
        # for minutes; the loop does not wait for it.
        self.preparing: dict[Future[Any], Actor] = {}
        self.vacant = 0  # slots with no worker, waiting for room in the cluster
        self.setup_errors: set[str] = set()
        self._started = 0  # workers asked for so far, for their names
        self._ever_ready = False
        self._shrunk_said = False
        self._next_room_check = 0.0
        self._retry_wait_s = RETRY_AFTER_FAILED_SETUP_S
        self._lost_starts = 0  # workers lost while starting since one last got ready
        self._held = 0  # workers not yet asked for: the first is being placed

    # -- growing and shrinking --------------------------------------------------------

    def start(self) -> None:
        """Ask for the first worker; `tend` asks for the rest once it is placed (or given
        up). Started together, the workers' interpreters would share the CPUs with the
        first one's, and the seed, which that one evaluates, would wait for all of them;
        they become ready as their set-ups finish."""
        self._held = self.size - 1
        self._spawn()

    def ready_count(self) -> int:
        return len(self.idle) + len(self.busy)

    def coming(self) -> int:
        return len(self.placing) + len(self.preparing) + self._held

    def waiting(self) -> list[Future[Any]]:
        """What the loop waits on for the pool, beside its evaluations."""
        return [*self.placing, *self.preparing]

    def waits_on(self, ref: Future[Any]) -> bool:
        return ref in self.placing or ref in self.preparing

    def started(self, ref: Future[Any]) -> None:
        """One of `refs()` is ready: a worker was placed, or finished its set-up."""
        if ref in self.placing:
            self._placed(ref)
        else:
            self._prepared(ref)

    def _placed(self, ref: Future[Any]) -> None:
        placing = self.placing.pop(ref)
        try:
            where: Placement = ref.result()
        except WorkerLost as exc:  # the actor could not be created, or its node died
            self._lost_in_setup(placing.actor, placing.name, exc)
            return
        self.workers[placing.actor] = where
        self.preparing[placing.actor.call("prepare", self.seed)] = placing.actor

    def _prepared(self, ref: Future[Any]) -> None:
        actor = self.preparing.pop(ref)
        where = self.workers[actor]
        try:
            error: str | None = ref.result()
        except WorkerLost as exc:
            self._lost_in_setup(actor, where.name, exc)
            return
        if error is not None:
            self.setup_errors.add(error)
            log.warning("%s failed its set-up: %s", where.name, error)
            self._back_off()
            self._vacate(actor, f"{where.name} failed its set-up")
            return
        self.idle.append(actor)
        self._ever_ready = True
        self._retry_wait_s = RETRY_AFTER_FAILED_SETUP_S
        self._lost_starts = 0
        ready = self.ready_count()
        log.info("%s ready (node %s, %s)", where.name, where.node_id, where.cpu)
        if self._shrunk_said and ready == self.size:
            self._shrunk_said = False
            self.events.emit(Event("info", f"the pool is back to {ready} worker(s)"))
        elif not self._shrunk_said:
            self.events.emit(Event("info", f"{where.name} ready ({ready} of {self.size})"))

    def _lost_in_setup(self, actor: Actor, name: str, exc: Exception) -> None:
        """Before any worker was ready this counts as a set-up error (an actor that cannot
        even be created is one); later it is a lost node, and the slot waits for room."""
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        log.warning("%s was lost while starting: %s", name, exc)
        if not self._ever_ready:
            self.setup_errors.add(f"{type(exc).__name__}: {first_line}")
        self.workers.pop(actor, None)
        self._lost_starts += 1
        if self._lost_starts > 1:  # once is a node that died under it; again is a pattern
            self._back_off()
        self._vacate(actor, f"{name} was lost while starting")

    def _back_off(self) -> None:
        """A slot whose worker failed to start waits before the next try, longer each time,
        so that a node that always fails is not asked again every ROOM_POLL_S."""
        self._next_room_check = time.monotonic() + self._retry_wait_s
        self._retry_wait_s = min(MAX_RETRY_S, self._retry_wait_s * 2)

    def tend(self) -> None:
        """Give up workers not placed by their deadline, and fill empty slots where the
        executor has room. Cheap when there is nothing to do: the executor is asked for room
        at most every ROOM_POLL_S, and only while a slot is empty."""
        if self._held and not self.placing:
            for _ in range(self._held):
                self._spawn()
            self._held = 0
        now = time.monotonic()
        for ref, placing in list(self.placing.items()):
            if placing.due <= now:
                del self.placing[ref]
                self._vacate(
                    placing.actor,
                    f"{placing.name} was not placed within {START_DEADLINE_S:.0f} s "
                    "(the cluster has no free CPU for it)",
                )
        if self.vacant and now >= self._next_room_check:
            self._next_room_check = now + ROOM_POLL_S
            free = self.executor.free_cpus()
            for _ in range(min(self.vacant, free)):
                self.vacant -= 1
                self._spawn()

    def replace(self, lost: Actor) -> None:
        """Kill first: a worker that hangs still holds its CPU, which its successor needs.
        The successor is asked for at once and placed when a CPU is free; if none is within
        START_DEADLINE_S the pool shrinks."""
        where = self.workers.pop(lost, None)
        log.warning("replacing %s, lost or overdue", where.name if where else "a worker")
        self.busy.pop(lost, None)
        self.one_job.pop(lost, None)
        lost.kill()
        self._spawn()

    def _spawn(self) -> None:
        name = f"worker-{self._started}"
        self._started += 1
        actor = self.executor.evaluation_worker(self.evaluator, self.sandbox, name)
        due = time.monotonic() + START_DEADLINE_S
        self.placing[actor.call("where")] = Placing(actor, name, due)

    def _vacate(self, actor: Actor, why: str) -> None:
        actor.kill()
        self.vacant += 1
        self._raise_if_hopeless()
        ready, coming = self.ready_count(), self.coming()
        text = (
            f"{why}: the pool has {ready} of {self.size} worker(s) ready"
            + (f" and {coming} starting" if coming else "")
            + f"; it looks for free CPUs every {ROOM_POLL_S:.0f} s and grows back"
        )
        self._shrunk_said = True
        self.events.emit(Event("warning", text))

    def _raise_if_hopeless(self) -> None:
        """Before any worker was ever ready, set-up errors with no worker left to try mean
        the task or the machines are broken; after that, a failing node is only skipped."""
        if self._ever_ready or self.coming() or not self.setup_errors:
            return
        problems = "; ".join(sorted(self.setup_errors))
        raise SetupFailed(f"evaluator set-up failed on the workers: {problems}")

    def summary(self) -> str:
        """For the board, only when the pool is not whole."""
        ready = self.ready_count()
        if ready == self.size:
            return ""
        coming = self.coming()
        return f"workers {ready}/{self.size}" + (f" ({coming} starting)" if coming else "")

    # -- handing out work -------------------------------------------------------------

    def has_room(self, *, queue: bool = False) -> bool:
        """Whether a job could be taken now: by an idle worker, or (`queue`) behind the one
        job of a busy worker."""
        return bool(self.idle) or (queue and bool(self.one_job))

    def take(
        self,
        *,
        avoid: str | None = None,
        cpu: str | None = None,
        queue: bool = False,
        alone: bool = False,
    ) -> Actor | None:
        """An idle worker, or None. `avoid` (a worker's name) asks for another worker, on
        another host where possible; `cpu` asks for that machine kind. A job that asks waits
        while a worker that would suit it is busy or starting, and takes what there is once
        none would. With `queue`, a job that asks for nothing may wait behind the one job of
        the worker that has been busy longest, when none is idle: the worker starts it the
        moment the first ends, without waiting for the driver (evolve/engine/dispatch.py says when).
        An `alone` job's worker gets nothing queued behind it."""
        choice = self._suitable(avoid, cpu) if self.idle else None
        if choice is not None:
            self.idle.remove(choice)
            self.busy[choice] = 1
            if not alone:
                self.one_job[choice] = None
            return choice
        if not (queue and avoid is None and cpu is None and self.one_job):
            return None
        choice = next(iter(self.one_job))
        del self.one_job[choice]
        self.busy[choice] = DEPTH
        return choice

    def _suitable(self, avoid: str | None, cpu: str | None) -> Actor | None:
        if avoid is None and cpu is None:
            return self.idle[-1]
        avoided_host = avoid.partition("@")[2] if avoid else None

        def rank(actor: Actor) -> tuple[bool, bool, bool]:
            w = self.workers[actor]
            return (
                cpu is not None and w.cpu != cpu,
                avoid is not None and w.name == avoid,
                avoided_host is not None and w.host == avoided_host,
            )

        best = min(self.idle, key=rank)
        if not any(rank(best)):
            return best
        # Nothing idle suits: wait if a suitable worker is busy, or may be starting.
        if any(not any(rank(a)) for a in self.busy) or self.coming():
            return None
        return best

    def give_back(self, actor: Actor) -> None:
        """One of the worker's jobs ended."""
        jobs = self.busy.pop(actor) - 1
        if jobs > 0:
            self.busy[actor] = jobs
            self.one_job[actor] = None
            return
        self.one_job.pop(actor, None)
        self.idle.append(actor)

    def stop(self) -> None:
        """Idle workers close their sandboxes first; busy ones (after Ctrl-C) and those still
        starting die at once, and the next sandbox on this host reaps what they leave."""
        closing = [actor.call("close") for actor in self.idle]
        if closing:
            wait(closing, timeout=CLOSE_TIMEOUT_S)
        starting = [p.actor for p in self.placing.values()] + list(self.preparing.values())
        for actor in [*self.idle, *self.busy, *starting]:
            actor.kill()
        self.idle, self.busy, self.one_job, self.placing, self.preparing = [], {}, {}, {}, {}
