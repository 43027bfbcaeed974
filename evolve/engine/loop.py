"""The steady-state evolution loop, driven from one process; its workers are actors on this
machine or on a Ray cluster (evolve/executors/).

There is no generation barrier: a fixed number of evaluations stay in flight, and each
finished one is recorded (in its own transaction) before the next job is submitted.
Everything the loop knows can be rebuilt from the store, which is what makes
`--resume` exact: finished evaluations are kept, pending candidates are re-issued.

The loop only ties its parts together; each concern lives in its own module:
  where parents come from  evolve/search/strategy.py
  which operator proposes  evolve/propose/proposer.py
  who is crowned           evolve/engine/champion.py
  what may still be spent  evolve/engine/budgets.py, evolve/engine/outage.py
  when models cannot work  evolve/propose/failure_streak.py
  keeping workers busy     evolve/engine/dispatch.py, evolve/engine/pool.py,
                           evolve/plugin/watchdog.py
  what the board is told   evolve/engine/events.py, evolve/engine/leaders.py
"""

from __future__ import annotations

import gc
import logging
import random
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evolve.engine.budgets import Budgets
from evolve.engine.candidate_cache import CandidateCache
from evolve.engine.champion import Champion, Decision, Referee, machine_kind
from evolve.engine.dispatch import Dispatcher, Job
from evolve.engine.events import Event, EventLog, Observer, Snapshot
from evolve.engine.leaders import Leaders
from evolve.engine.pool import WorkerPool
from evolve.engine.scoring import score
from evolve.engine.workers import Finished
from evolve.executors import Executor, ready
from evolve.mutators.factory import make_mutators
from evolve.plugin.evaluator import Evaluator
from evolve.plugin.failure_line import event_line
from evolve.plugin.results import ERROR, TIMEOUT, EvalResult
from evolve.plugin.watchdog import Watchdog, evaluation_deadline
from evolve.propose.proposer import Proposer
from evolve.propose.services import plan_services
from evolve.runtime.lease import RunTakenOver
from evolve.search import make_strategy
from evolve.search.bandit import improvement_reward
from evolve.search.placement import placement, stored_placements
from evolve.store import CandidateRecord, RunRecord, Store
from evolve.task.loading import LoadedTask
from evolve.views.objective_terms import Terms

log = logging.getLogger("evolve.engine.loop")

SEED_TRIES = 3  # evaluations of the seed that may time out or crash before the run gives up
REMEASURE_TRIES = 3  # re-measurements of a candidate that may time out before it is left be
EVENT_CHARS = 200  # of the failing stage's line in a failure event
IDLE_WAIT_S = 0.25  # the longest the loop sleeps before it looks at its workers again


@dataclass(frozen=True)
class Outcome:
    run_name: str
    reason: str  # why the loop ended
    best: CandidateRecord | None
    seed_id: int
    failure: str | None = None  # why the run failed, where the model path cannot work


class Engine:
    def __init__(
        self,
        task: LoadedTask,
        store: Store,
        run: RunRecord,
        evaluator: Evaluator,
        executor: Executor,
        *,
        workers: int,
        results_dir: Path,
        observer: Observer | None = None,
        holds_run: Callable[[], bool] = lambda: True,
    ) -> None:
        """`holds_run` says whether this driver still holds the run's lease (see
        evolve/runtime/lease.py); it is asked before each turn's writes, and a driver that lost the
        run stops with RunTakenOver and leaves the run's rows to the driver that has it."""
        self.task, self.spec, self.store, self.run_name = task, task.spec, store, run.name
        self.holds_run = holds_run
        self.added = store.count_candidates(run.name)
        # Seeded by the run's seed and its progress, so a resumed run makes its choices
        # deterministically too.
        self.rng = random.Random(f"{run.seed}:{self.added}")
        self.seed_id = store.plant_seed(run.name, task.seed).id
        self.added = max(self.added, 1)
        self.events = EventLog(observer)
        self.budgets = Budgets(self.spec.budget, store, run.name, wall_used_s=run.wall_s_used)
        self.pool = WorkerPool(
            executor, evaluator, self.spec.sandbox, task.seed, workers, self.events
        )
        deadline_s = evaluation_deadline(evaluator, self.spec.sandbox.limits())
        self.dispatch = Dispatcher(self.pool, Watchdog(deadline_s), self.events)
        # How long work in flight may outlive the wall-time budget: one sandbox run's limit.
        self.overtime_grace_s = min(self.spec.sandbox.timeout_s, deadline_s)
        self.candidates = CandidateCache(store)
        self.leaders = Leaders()
        terms = Terms(tuple(self.spec.objectives), self.spec.evaluator.name)
        referee = Referee(self.spec.champion, store, terms)
        self.champion = Champion(referee, results_dir, run.name)
        self.strategy = make_strategy(self.spec.search, self.spec.objectives, self.seed_id)
        mutators, self.reader = make_mutators(
            task, evaluator, executor, store_url=store.url, run_name=run.name
        )
        self.services = plan_services(self.spec, store.url, run.name)
        # Proposals kept in flight: enough that no evaluation slot waits for one; model
        # calls are slow, so they get slots of their own on top.
        self.slots = self.pool.size + (self.spec.llm.concurrency if self.spec.llm else 0)
        self.proposer = Proposer(
            self.spec,
            mutators,
            store=store,
            run_name=run.name,
            strategy=self.strategy,
            candidates=self.candidates,
            budgets=self.budgets,
            events=self.events,
            services=self.services,
            slots=self.slots,
            executor=executor,
        )
        self.recorded = self.failed = self.seed_tries = 0
        self.remeasure_timeouts: Counter[int] = Counter()  # by candidate id

    # -- set-up -----------------------------------------------------------------------

    def _restore(self) -> None:
        """Rebuild selection state from the store: scores, islands, migrations, champion,
        the proposals ledger and the novelty index."""
        programs = self.store.programs(self.run_name)
        self.proposer.restore(programs)
        scored = stored_placements(self.store, self.run_name, programs)
        self.strategy.restore(scored, self.store.migrations(self.run_name))
        self.proposer.spread.restore(placed.id for placed in scored)
        self.leaders.restore((placed.id, placed.score) for placed in scored)
        self.candidates.warm(self.store.top(self.run_name, self.candidates.size))
        for candidate in self.champion.restore():
            self.dispatch.add(self._remeasure(candidate))
        counts = self.store.status_counts(self.run_name)
        self.recorded = sum(n for status, n in counts.items() if status != "pending")
        self.failed = sum(n for status, n in counts.items() if status not in ("pending", "ok"))
        for candidate in self.store.pending_candidates(self.run_name):
            self.candidates.remember(candidate)
            self.dispatch.add(Job(candidate, "evaluate"))

    # -- the loop ---------------------------------------------------------------------

    def run(self) -> Outcome:
        self._restore()
        # The proposal workers (which load the model SDKs) are asked for first: they take
        # longest, and the evaluation workers are ready in time for the seed anyway.
        self.proposer.start()
        self.pool.start()
        self.events.emit(Event("info", f"starting {self.pool.size} evaluation worker(s)"))
        # What the driver holds by now (its imports, the store, the task, what was restored) lives
        # as long as the run: out of the collector's sight, a full collection costs a
        # fraction of what it would, a stall of the loop that holds every slot up.
        # (Not collected first: a full collection here cost start-up more than the
        # garbage it would free, which the collector sees again after the loop.)
        gc.freeze()
        try:
            reason = self._loop()
        finally:
            gc.unfreeze()  # a process that runs engine after engine (tests) frees each
            mine = self.holds_run()
            if mine:
                self.budgets.flush_wall(force=True)
            self.pool.stop()
            self.proposer.close()
            if mine:
                # Proposals cut off by a wall-time stop or Ctrl-C: closed now, with the calls
                # they stored, so the ledger and the bandit's arms agree without a resume.
                self.store.interrupt_proposals(self.run_name)
            if self.reader is not None:
                self.reader.kill()
        best = self.store.candidate(self.champion.best[0]) if self.champion.best else None
        return Outcome(self.run_name, reason, best, self.seed_id, self.proposer.streak.failure)

    def _loop(self) -> str:
        done: list[Future[Any]] = []
        while True:
            # What arrived together is written together, with the proposals it sets off:
            # one commit per wait.
            with self.store.turn():
                self._take(done)
                if failure := self.proposer.streak.failure:
                    return failure  # what is in flight is abandoned (see `run`)
                overtime = self.budgets.overtime_s()
                if overtime is None:
                    self.dispatch.submit(self.rng)
                elif ended := self._out_of_time(overtime):
                    return ended
                self._propose()
            self.proposer.send()
            if overtime is not None or self.budgets.spent_reason(self.added) is not None:
                self.proposer.stop()
            self.events.tick(self._snapshot)
            if self.dispatch.idle() and not self.proposer.in_flight:
                return self._stop_reason() or self._stuck_reason()
            self.pool.tend()
            waiting = [*self.dispatch.in_flight, *self.proposer.in_flight, *self.pool.waiting()]
            if not waiting:  # jobs waiting for the sandbox to come back, or for room for a worker
                time.sleep(self.dispatch.outage.wait_s() or IDLE_WAIT_S)
                done = []
                continue
            done = ready(waiting, IDLE_WAIT_S)
            if not self.holds_run():
                raise RunTakenOver(f"another driver took run {self.run_name} over")

    def _take(self, done: list[Future[Any]]) -> None:
        for future in done:
            if future in self.dispatch.in_flight:
                if finished := self.dispatch.finish(future):
                    self._record_result(*finished)
            elif future in self.proposer.in_flight:
                room = self.budgets.room_for(self.added)
                self._adopt(self.proposer.finish(future, room=room))
            elif self.pool.waits_on(future):
                self.pool.started(future)
            # else: a job queued on a worker lost earlier in this batch, already back in
            # the queue (evolve/engine/dispatch.py)
        for job, finished in self.dispatch.overdue():
            self._record_result(job, finished)
        self.budgets.flush_wall()

    def _adopt(self, child: CandidateRecord | None) -> None:
        """A proposal's new candidate, queued for evaluation."""
        if child is not None:
            self.added += 1
            self.candidates.remember(child)
            self.dispatch.add(Job(child, "evaluate"))

    def _out_of_time(self, overtime: float) -> str | None:
        """Past the wall-time budget nothing new starts. What is in flight may finish within
        the grace; then it is abandoned (its workers are killed as the pool stops) and its
        candidates stay pending, for `--resume` to evaluate, as do the queued ones."""
        reason = self.budgets.stop_reason(self.added) or "wall-time budget reached"
        evaluations, proposals = len(self.dispatch.in_flight), len(self.proposer.in_flight)
        if not evaluations and not proposals:
            return reason
        if overtime < self.overtime_grace_s:
            return None
        text = (
            f"{evaluations} evaluation(s) and {proposals} proposal(s) still in flight "
            f"{self.overtime_grace_s:.0f}s past the wall-time budget were abandoned; "
            "their candidates stay pending and `evolve run --resume` evaluates them"
        )
        self.events.emit(Event("warning", text))
        return reason

    def _stop_reason(self) -> str | None:
        return self.dispatch.outage.give_up_reason() or self.budgets.stop_reason(self.added)

    def _stuck_reason(self) -> str:
        seed = self.candidates.get(self.seed_id)
        if seed.score is None:
            return f"the seed is not usable (status {seed.status}), so there is nothing to evolve"
        if self.strategy.pick(random.Random(0)) is None:
            return (
                "no scored program has a place to be picked from (MAP-Elites: is every "
                "feature a metric the seed reports? run.log names a missing one)"
            )
        return "nothing left to evaluate"

    def _propose(self) -> None:
        """Keep `slots` proposals being made, and as many waiting for a slot (see
        evolve/propose/workers.py). A proposal made in the driver is concluded at once, so
        a run of duplicates goes on until a new child is queued or the fruitless stop.
        Children waiting for a worker hold new proposals back once there are as many as
        slots: fewer, and a burst of model replies (which arrive together when the model
        answers in constant time) left the model's slots idle while the workers went
        through the burst."""
        while (
            self._stop_reason() is None
            and not self.proposer.full
            and len(self.dispatch.queue) < self.slots
            and self.budgets.room_for(self.added + self.proposer.pending)
            and self.proposer.submit(self.rng, self.added)
        ):
            for job, proposal in self.proposer.take_made():
                room = self.budgets.room_for(self.added)
                self._adopt(self.proposer.conclude(job, proposal, room=room))

    def _retry_seed(self, job: Job, finished: Finished) -> bool:
        """Whether the seed's failed evaluation is tried again instead of recorded: one that
        timed out or crashed (a loaded node, a lost worker) may pass on the next try, on
        another worker where there is one, and without the seed nothing can be evolved. A
        deterministic failure is not retried."""
        result = finished.result
        if job.candidate.id != self.seed_id or job.kind != "evaluate":
            return False
        if result.status not in (TIMEOUT, ERROR):
            return False
        self.seed_tries += 1
        if self.seed_tries >= SEED_TRIES:
            return False
        text = (
            f"the seed's evaluation ended {result.status} on {finished.worker} (try "
            f"{self.seed_tries} of {SEED_TRIES}); trying again, on another worker if there is one"
        )
        log.warning("%s: %s", text, result.feedback[-1000:])
        self.events.emit(Event("warning", text, job.candidate.id))
        self.dispatch.add(Job(job.candidate, "evaluate", avoid=finished.worker), first=True)
        return True

    def _remeasure_timed_out(self, job: Job, finished: Finished) -> bool:
        """Whether a re-measurement that timed out is passed over rather than recorded. It
        measured nothing (the machine was too busy, or the candidate's run too slow this
        time), and recorded it would fail a candidate whose evaluation passed: it is tried
        again, up to REMEASURE_TRIES times, and after that the candidate keeps what it was
        measured at and is not crowned on that measurement alone."""
        if job.kind != "remeasure" or finished.result.status != TIMEOUT:
            return False
        candidate = job.candidate.id
        self.remeasure_timeouts[candidate] += 1
        tries = self.remeasure_timeouts[candidate]
        if tries < REMEASURE_TRIES:
            text = (
                f"#{candidate}'s re-measurement timed out on {finished.worker} (try {tries} of "
                f"{REMEASURE_TRIES}); trying again"
            )
            self.dispatch.add(self._remeasure(self.candidates.get(candidate)), first=True)
        else:
            text = (
                f"#{candidate}'s re-measurement timed out {tries} times: it keeps its first "
                "measurement, and is not crowned on it alone"
            )
        log.warning("%s", text)
        self.events.emit(Event("warning", text, candidate))
        return True

    def _record_result(self, job: Job, finished: Finished) -> None:
        result = finished.result
        if self._retry_seed(job, finished) or self._remeasure_timed_out(job, finished):
            return
        if result.status == ERROR:  # the evaluator's fault, or the worker's: its traceback
            log.error("#%d on %s: %s", job.candidate.id, finished.worker, result.feedback)
        value = score(result.metrics, self.spec.objectives) if result.ok else None
        if result.ok and value is None:
            names = [o.name for o in self.spec.objectives]
            result.status = ERROR
            result.feedback += f"\nthe evaluator reported no finite value for {names}"
        review = self.champion.referee.review
        stepped = None if value is None else review(job.kind, job.candidate, result)
        reward = self._reward(job, value)
        # The record as it stands now, not as the job saw it: another measurement of the
        # same candidate may have been recorded since the job was made.
        before = self.candidates.get(job.candidate.id)
        candidate = self.store.record_evaluation(
            before,
            result,
            kind=job.kind,
            score=value,
            input_seed=job.input_seed,
            worker=finished.worker,
            started_at=finished.started_at,
            finished_at=finished.finished_at,
            reward=reward,
        )
        if reward is not None and self.proposer.bandit is not None:
            self.proposer.bandit.rewarded(*reward)
        self.candidates.remember(candidate)
        self.proposer.briefing.measured(before, candidate, result, value)
        self.leaders.update(candidate.id, candidate.score)
        self.proposer.evaluated(candidate)
        if job.kind == "evaluate":
            self.recorded += 1
        self._update_search(candidate, job, result, stepped)

    def _reward(self, job: Job, value: float | None) -> tuple[str, float] | None:
        """What a bandit-chosen child earns its arm: its improvement over its parent."""
        arm = job.candidate.mutation.get("arm")
        bandit = self.proposer.bandit
        if bandit is None or job.kind != "evaluate" or arm not in bandit.stats:
            return None
        parent = self.candidates.get(job.candidate.parent_ids[0])
        return arm, improvement_reward(value, parent.score)

    def _update_search(
        self, candidate: CandidateRecord, job: Job, result: EvalResult, stepped: str | None
    ) -> None:
        if candidate.score is None:
            self.strategy.discard(candidate.id)
            if job.kind == "evaluate":
                self.failed += 1
                self.proposer.failed(candidate)
            said = event_line(result.stages, result.feedback, EVENT_CHARS)
            text = f"#{candidate.id} {candidate.status}: {said}"
            self.events.emit(Event("failure", text, candidate.id))
            return
        self.budgets.fruitless = 0
        if job.kind == "evaluate":
            self.proposer.passed(candidate)
        self.strategy.add(placement(self.store, self.spec.objectives, candidate, result))
        decision = self.champion.consider(candidate, stepped)
        if decision is not None:
            self._decide(candidate, decision)
        if job.kind == "evaluate":
            for moved, island in self.strategy.migrations_due(self.recorded):
                self.store.add_migration(self.run_name, moved, island)
                self.events.emit(Event("migration", f"#{moved} migrates to island {island}", moved))

    def _decide(self, candidate: CandidateRecord, decision: Decision) -> None:
        if decision.event == "remeasure":
            self.dispatch.add(self._remeasure(candidate), first=True)
        self.events.emit(Event(decision.event, decision.text, candidate.id))

    def _remeasure(self, candidate: CandidateRecord) -> Job:
        """On the machine kind of the candidate's first measurement, where a worker of that
        kind is alive: its score is the lowest of its measurements, and the referee compares
        them, so they should come from one kind of machine."""
        first = self.store.evaluations(candidate.id)[:1]
        return Job(candidate, "remeasure", cpu=machine_kind(first[0].sandbox) if first else None)

    def _snapshot(self) -> Snapshot:
        best = self.champion.best
        return Snapshot(
            run_name=self.run_name,
            candidates=self.added,
            budget_candidates=self.spec.budget.candidates,
            elapsed_s=self.budgets.elapsed,
            budget_wall_s=self.spec.budget.wall_time_s,
            evaluated=self.recorded,
            failed=self.failed,
            in_flight=len(self.dispatch.in_flight),
            best_id=best[0] if best else None,
            best_score=best[1] if best else None,
            spend=self.budgets.spend_line() if self.spec.llm else "",
            outage=self.services.outage_line(),
            search=self.strategy.summary(),
            workers=self.pool.summary(),
            leaders=self.leaders.version,
        )
