"""The steady-state evolution loop, driven from one process over Ray.

There is no generation barrier: a fixed number of evaluations stay in flight, and each
finished one is recorded (in its own transaction) before the next job is submitted.
Everything the loop knows can be rebuilt from the store, which is what makes
`--resume` exact: finished evaluations are kept, pending candidates are re-issued.
"""

from __future__ import annotations

import logging
import random
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, replace
from pathlib import Path

import ray
from ray.exceptions import RayActorError, RayError

from evolve import workers
from evolve.champion import Decision, Referee
from evolve.evaluator import Evaluator
from evolve.events import Event, Observer, Snapshot
from evolve.mutators import LLM_OPERATORS, Autotuner, MutationRequest, Parent
from evolve.mutators.agent_tools import AgentServices
from evolve.mutators.factory import make_mutator
from evolve.mutators.llm import key_names, model_config
from evolve.results import ERROR, TIMEOUT, UNAVAILABLE, EvalResult
from evolve.runs import write_best
from evolve.scoring import score
from evolve.search import Islands
from evolve.search.bandit import ArmStats, CostAwareBandit, arm_name, improvement_reward, split_arm
from evolve.secrets import Keys
from evolve.store import CandidateRecord, RunRecord, Store
from evolve.taskfile import LoadedTask
from evolve.watchdog import Watchdog, evaluation_deadline

log = logging.getLogger("evolve.engine")

MAX_ATTEMPTS = 3  # evaluations lost to a dead worker are retried this often, then recorded
MAX_FRUITLESS = 200  # proposals in a row that were duplicates or failures before giving up
WALL_FLUSH_S = 1.0
UNAVAILABLE_RETRY_S = 5.0  # wait before retrying a job the sandbox could not run
UNAVAILABLE_GIVE_UP_S = 600.0  # a sandbox down this long ends the run (nothing is lost)
CLOSE_TIMEOUT_S = 10.0  # for workers to remove their containers at the end of a run
FINISHER = "finisher"  # the autotuner tuning a model-made child
FINISH_KEPT = 16  # the latest model-made children that the finisher cycles through
BROKEN_KEPT = 64  # failed candidates remembered for the fix operator
RECORD_CACHE = 4096  # candidate records kept in memory; a bound, not the population


class SetupFailed(RuntimeError):
    """The evaluator could not be set up on the workers (a missing GPU or tool, a broken
    seed): nothing can be evolved until the machine or the task changes."""


@dataclass(frozen=True)
class Job:
    candidate: CandidateRecord
    kind: str  # "evaluate" or "remeasure"
    attempt: int = 1
    input_seed: int = 0  # drawn when the job is submitted


@dataclass(frozen=True)
class MutationJob:
    island: int
    parent: CandidateRecord
    mutator: str
    arm: str | None = None  # the bandit's (operator, model) choice, when it chose


@dataclass(frozen=True)
class Outcome:
    run_name: str
    reason: str  # why the loop ended
    best: CandidateRecord | None
    seed_id: int


class Engine:
    def __init__(
        self,
        task: LoadedTask,
        store: Store,
        run: RunRecord,
        evaluator: Evaluator,
        *,
        workers: int,
        results_dir: Path,
        observer: Observer | None = None,
    ) -> None:
        self.task, self.spec, self.store, self.run_name = task, task.spec, store, run.name
        self.evaluator = evaluator
        self.worker_count = workers
        self.mutation_slots = workers + (task.spec.llm.concurrency if task.spec.llm else 0)
        self.results_dir = results_dir
        self.seed_id = -1  # known once the seed is in the store
        self.observer = observer
        self.islands = Islands(
            self.spec.search.islands,
            pressure=self.spec.search.selection_pressure,
            exploration=self.spec.search.exploration,
        )
        self.added = store.count_candidates(run.name)
        # Seeded by the run's seed and its progress, so a resumed run makes its choices
        # deterministically too.
        self.rng = random.Random(f"{run.seed}:{self.added}")
        self.wall_before = run.wall_s_used
        self.started = time.monotonic()
        self.flushed = self.started
        self.queue: deque[Job] = deque()
        self.evals: dict[ray.ObjectRef, tuple[Job, ray.actor.ActorHandle]] = {}
        self.mutations: dict[ray.ObjectRef, MutationJob] = {}
        self.idle: list[ray.actor.ActorHandle] = []
        deadline_s = evaluation_deadline(evaluator, self.spec.sandbox.limits())
        self.watchdog: Watchdog[ray.ObjectRef] = Watchdog(deadline_s)
        self.keys = Keys.read(key_names(self.spec.llm))  # for model proposals only
        services = self._agent_services(store) if self._has("agent") else None
        self.reader = services.reader if services else None
        self.mutators = {
            m.name: (ray.put(make_mutator(m, task, services)), m.weight) for m in self.spec.mutators
        }
        self.bandit = self._restore_bandit() if self.spec.llm and self.spec.llm.adaptive else None
        self.spent_usd, self.spent_tokens = store.llm_spend(run.name)
        self.llm_proposals = 0  # finished proposals that called a model, for their average cost
        self.next_island = 0
        self.recorded = 0
        self.failed = 0
        self.fruitless = 0
        self.best: tuple[int, float] | None = None
        self.referee = Referee(self.spec.champion, store)
        self.records: OrderedDict[int, CandidateRecord] = OrderedDict()
        # Failed candidates waiting for the `fix` operator, each tried once, newest kept.
        self.broken: deque[int] = deque(maxlen=BROKEN_KEPT)
        # Model-made children that passed, tuned in turn by the autotuner (the finisher).
        self.to_finish: deque[int] = deque(maxlen=FINISH_KEPT)
        self.finisher = ray.put(Autotuner({}))
        self.proposals = self.finishes = 0
        self.unavailable_since: float | None = None
        self.retry_at = 0.0

    # -- set-up -----------------------------------------------------------------------

    def _has(self, mutator: str) -> bool:
        return any(m.name == mutator for m in self.spec.mutators)

    def _agent_services(self, store: Store) -> AgentServices:
        """Drafts run in a sandbox like the workers'; the store is read through an actor on
        this node, so agents on other machines see the run too."""
        return AgentServices(
            self.evaluator,
            self.spec.sandbox,
            workers.start_store_reader(store.url, self.run_name),
        )

    def _restore_bandit(self) -> CostAwareBandit:
        """Arms are the configured model operators times the models; what they learnt before
        a crash or Ctrl-C comes back from the store."""
        llm = self.spec.llm
        assert llm is not None
        labels = [(model_config(m).label, m.weight) for m in llm.models]
        weights = {
            arm_name(m.name, label): m.weight * weight
            for m in self.spec.mutators
            if m.name in LLM_OPERATORS
            for label, weight in labels
        }
        known = {
            arm: ArmStats(pulls, reward, usd)
            for arm, (pulls, reward, usd) in self.store.bandit_arms(self.run_name).items()
        }
        return CostAwareBandit(weights, known)

    def _restore(self) -> None:
        """Rebuild selection state from the store: scores, islands, migrations, champion."""
        for candidate_id, island, value in self.store.scored(self.run_name):
            self.islands.add(candidate_id, value, self._homes(candidate_id, island))
        for candidate_id, island in self.store.migrations(self.run_name):
            self.islands.migrate(candidate_id, island)
        champion, unverified = self.referee.restore(self.run_name)
        if champion is not None:
            self.best = (champion.id, champion.score)  # type: ignore[assignment]
        self.queue.extend(Job(candidate, "remeasure") for candidate in unverified)
        counts = self.store.status_counts(self.run_name)
        self.recorded = sum(n for status, n in counts.items() if status != "pending")
        self.failed = sum(n for status, n in counts.items() if status not in ("pending", "ok"))
        self.queue.extend(Job(c, "evaluate") for c in self.store.pending_candidates(self.run_name))

    def _homes(self, candidate_id: int, island: int) -> list[int]:
        """The seed lives on every island; everything else on the island that made it."""
        if candidate_id == self.seed_id:
            return list(range(self.islands.count))
        return [island]

    def _start_workers(self) -> None:
        actors = [
            workers.EvaluationWorker.remote(self.evaluator, self.spec.sandbox, f"worker-{i}")
            for i in range(self.worker_count)
        ]
        errors = ray.get([a.prepare.remote(self.task.seed) for a in actors])
        problems = sorted({e for e in errors if e})
        if problems:
            raise SetupFailed("evaluator set-up failed on the workers: " + "; ".join(problems))
        self.idle = actors

    def _replace_worker(self, dead: ray.actor.ActorHandle) -> None:
        """Kill first: a worker that hangs still holds its CPU, which its successor needs."""
        log.warning("replacing a lost or overdue evaluation worker")
        ray.kill(dead, no_restart=True)
        actor = workers.EvaluationWorker.remote(self.evaluator, self.spec.sandbox, "worker-r")
        error = ray.get(actor.prepare.remote(self.task.seed))
        if error:
            raise RuntimeError(f"a replacement worker failed its set-up: {error}")
        self.idle.append(actor)

    @staticmethod
    def _stop_workers(idle: list[ray.actor.ActorHandle], busy: list[ray.actor.ActorHandle]) -> None:
        """Idle workers close their sandboxes first; busy ones (after Ctrl-C) die at once,
        and the next sandbox on this host reaps what they leave."""
        closing = [actor.close.remote() for actor in idle]
        ray.wait(closing, num_returns=len(closing), timeout=CLOSE_TIMEOUT_S)
        for actor in [*idle, *busy]:
            ray.kill(actor, no_restart=True)

    # -- the loop ---------------------------------------------------------------------

    def run(self) -> Outcome:
        if self.added == 0:
            seed = self.store.add_candidate(
                self.run_name,
                self.task.seed,
                parent_ids=[],
                island=0,
                generation=0,
                mutation={"operator": "seed"},
            )
            assert seed is not None  # a new run is empty; _restore queues the pending seed
            self.added = 1
        seed_candidate = self.store.seed_candidate(self.run_name)
        assert seed_candidate is not None
        self.seed_id = seed_candidate.id
        self._restore()
        self._start_workers()
        self._emit(Event("info", f"{self.worker_count} evaluation worker(s) ready"))
        try:
            reason = self._loop()
        finally:
            self._flush_wall(force=True)
            self._stop_workers(self.idle, [a for _, a in self.evals.values()])
            if self.reader is not None:
                ray.kill(self.reader)
        best = self.store.candidate(self.best[0]) if self.best else None
        return Outcome(self.run_name, reason, best, self.seed_id)

    def _loop(self) -> str:
        while True:
            self._submit()
            if not self.evals and not self.mutations and not self.queue:
                return self._stop_reason() or self._stuck_reason()
            refs = [*self.evals, *self.mutations]
            if not refs:  # only jobs waiting for the sandbox to come back
                time.sleep(min(0.25, max(0.0, self.retry_at - time.monotonic())))
                continue
            ready, _ = ray.wait(refs, num_returns=1, timeout=0.25)
            if ready:
                ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            for ref in ready:
                if ref in self.evals:
                    self._finish_evaluation(ref)
                else:
                    self._finish_mutation(ref)
            for ref in self.watchdog.overdue():
                self._time_out(ref)
            self._flush_wall()
            self._tick()

    def _stop_reason(self) -> str | None:
        budget = self.spec.budget
        if budget.candidates is not None and self.added >= budget.candidates:
            return f"candidate budget reached ({budget.candidates})"
        if budget.wall_time_s is not None and self.elapsed >= budget.wall_time_s:
            return f"wall-time budget reached ({budget.wall_time_s:.0f}s)"
        if (
            self.unavailable_since is not None
            and time.monotonic() - self.unavailable_since > UNAVAILABLE_GIVE_UP_S
        ):
            return f"the sandbox was unavailable for {UNAVAILABLE_GIVE_UP_S:.0f}s"
        if budget.usd is not None and self.spent_usd >= budget.usd:
            return f"USD budget reached (${self.spent_usd:.4f} of ${budget.usd:g})"
        if budget.tokens is not None and self.spent_tokens >= budget.tokens:
            return f"token budget reached ({self.spent_tokens} of {budget.tokens})"
        if self.fruitless >= MAX_FRUITLESS:
            return f"the last {MAX_FRUITLESS} proposals were all known programs or failures"
        return None

    def _stuck_reason(self) -> str:
        seed = self._record(self.seed_id)
        if seed.score is None:
            return f"the seed is not usable (status {seed.status}), so there is nothing to evolve"
        return "nothing left to evaluate"

    @property
    def elapsed(self) -> float:
        return self.wall_before + time.monotonic() - self.started

    def _submit(self) -> None:
        while self.idle and self.queue and time.monotonic() >= self.retry_at:
            job = replace(self.queue.popleft(), input_seed=self.rng.getrandbits(63))
            actor = self.idle.pop()
            ref = actor.evaluate.remote(job.candidate.program, job.input_seed)
            self.evals[ref] = (job, actor)
            self.watchdog.watch(ref)
        # Keep enough proposals coming that no evaluation slot waits for one; model calls
        # are slow, so they get slots of their own on top.
        while (
            self._stop_reason() is None
            and len(self.mutations) < self.mutation_slots
            and len(self.queue) < self.worker_count
            and self.added + len(self.mutations) < (self.spec.budget.candidates or 1 << 62)
        ):
            if not self._submit_mutation():
                break

    def _submit_mutation(self) -> bool:
        if self._finisher_due():
            return self._submit_finisher()
        names = [n for n in self.mutators if n != "fix" or self.broken]
        if not names:
            return False  # only `fix` is configured, and nothing is broken yet
        name = self.rng.choices(names, weights=[self.mutators[n][1] for n in names])[0]
        arm = model = None
        if name in LLM_OPERATORS:
            if not self._affordable():
                return False
            if self.bandit is not None:
                arm = self.bandit.choose(self.rng, [a for a in self.bandit.weights if self._may(a)])
                name, model = split_arm(arm)
        island = self.next_island
        self.next_island = (self.next_island + 1) % self.islands.count
        parent_id = self.broken.popleft() if name == "fix" else self.islands.pick(island, self.rng)
        if parent_id is None:
            island = max(range(self.islands.count), key=self.islands.size)
            parent_id = self.islands.pick(island, self.rng)
            if parent_id is None:
                return False  # nothing scored yet: wait for the seed
        parent = self._record(parent_id)
        if name == "fix":
            island = parent.island  # the repaired program goes back where the broken one was
        others = []
        partner_id = self.islands.pick(island, self.rng)
        if partner_id is not None and partner_id != parent_id:
            others.append(self._as_parent(self._record(partner_id)))
        request = MutationRequest(
            self._as_parent(parent), tuple(others), self.rng.getrandbits(63), model
        )
        self.proposals += 1
        keys = self.keys if name in LLM_OPERATORS else Keys()
        ref = workers.propose.remote(self.mutators[name][0], request, keys)
        self.mutations[ref] = MutationJob(island, parent, name, arm)
        return True

    def _may(self, arm: str) -> bool:
        """`fix` needs a broken candidate to work on."""
        return split_arm(arm)[0] != "fix" or bool(self.broken)

    def _affordable(self) -> bool:
        """Whether one more model proposal fits the USD and token budgets, counting those in
        flight at the average cost so far: so a run stops within one proposal of its limit."""
        budget = self.spec.budget
        if budget.usd is None and budget.tokens is None:
            return True
        in_flight = sum(job.mutator in LLM_OPERATORS for job in self.mutations.values())
        if not self.llm_proposals:
            return in_flight == 0  # no cost known yet: feel the price with one request
        for spent, limit in ((self.spent_usd, budget.usd), (self.spent_tokens, budget.tokens)):
            if limit is not None and spent + in_flight * spent / self.llm_proposals >= limit:
                return False
        return True

    def _finisher_due(self) -> bool:
        """Structure from the model, constants from the tuner: the autotuner takes its share
        of proposals to tune the knobs of model-made children that passed."""
        share = self.spec.llm.finisher_share if self.spec.llm else 0.0
        return bool(self.to_finish) and self.finishes < share * (self.proposals + self.finishes)

    def _submit_finisher(self) -> bool:
        parent = self._record(self.to_finish[0])
        self.to_finish.rotate(-1)
        self.finishes += 1
        request = MutationRequest(self._as_parent(parent), (), self.rng.getrandbits(63))
        ref = workers.propose.remote(self.finisher, request, Keys())
        self.mutations[ref] = MutationJob(parent.island, parent, FINISHER)
        return True

    def _finish_mutation(self, ref: ray.ObjectRef) -> None:
        job = self.mutations.pop(ref)
        try:
            proposal = ray.get(ref)
        except RayError as exc:
            proposal = workers.MutationFailed(f"mutation task lost: {exc}")
        if isinstance(proposal, workers.MutationFailed):
            if proposal.trace:
                log.error("%s crashed on #%d:\n%s", job.mutator, job.parent.id, proposal.trace)
            self._record_calls(proposal.calls, job)
            self.fruitless += 1
            self._emit(
                Event("failure", f"{job.mutator} failed on #{job.parent.id}: {proposal.reason}")
            )
            return
        budget = self.spec.budget.candidates
        if budget is not None and self.added >= budget:
            self._record_calls(proposal.calls, job)
            return
        self._count_spend(proposal.calls, job.arm)
        child = self.store.add_candidate(
            self.run_name,
            proposal.program,
            parent_ids=[job.parent.id, *_partners(proposal.record)],
            island=job.island,
            generation=job.parent.generation + 1,
            mutation=_mutation_record(proposal.record, job),
            llm_calls=proposal.calls,
            arm=job.arm,
        )
        if child is None:
            self.fruitless += 1  # already evaluated: never evaluate a program twice
            self.store.record_llm_calls(
                self.run_name, proposal.calls, operator=job.mutator, arm=job.arm
            )
            return
        self.added += 1
        self.queue.append(Job(child, "evaluate"))

    def _record_calls(self, calls: tuple, job: MutationJob) -> None:
        self._count_spend(calls, job.arm)
        self.store.record_llm_calls(self.run_name, calls, operator=job.mutator, arm=job.arm)

    def _count_spend(self, calls: tuple, arm: str | None) -> None:
        usd = sum(call.cost_usd for call in calls)
        self.llm_proposals += bool(calls)
        self.spent_usd += usd
        self.spent_tokens += sum(call.input_tokens + call.output_tokens for call in calls)
        if arm is not None and self.bandit is not None:
            self.bandit.pulled(arm, usd)

    def _finish_evaluation(self, ref: ray.ObjectRef) -> None:
        job, actor = self.evals.pop(ref)
        self.watchdog.forget(ref)
        try:
            finished: workers.Finished = ray.get(ref)
        except RayActorError as exc:
            self._replace_worker(actor)
            if job.attempt < MAX_ATTEMPTS:
                self._emit(Event("warning", f"worker died during #{job.candidate.id}; retrying"))
                self.queue.appendleft(Job(job.candidate, job.kind, job.attempt + 1))
                return
            now = time.time()
            lost = EvalResult(
                ERROR, feedback=f"the evaluation worker died {MAX_ATTEMPTS} times: {exc}"
            )
            finished = workers.Finished(lost, now, now, "lost")
        else:
            self.idle.append(actor)
        self._record_result(job, finished)

    def _time_out(self, ref: ray.ObjectRef) -> None:
        """A worker past the deadline is lost, stopped or stuck: kill and replace it, and
        record its candidate as timed out (not retried: it would hang the next worker too)."""
        job, actor = self.evals.pop(ref)
        self.watchdog.forget(ref)
        self._emit(Event("warning", f"#{job.candidate.id}: evaluation past its deadline"))
        self._replace_worker(actor)
        now = time.time()
        result = EvalResult(TIMEOUT, feedback=self.watchdog.feedback())
        self._record_result(
            job, workers.Finished(result, now - self.watchdog.deadline_s, now, "killed")
        )

    def _record_result(self, job: Job, finished: workers.Finished) -> None:
        result = finished.result
        if result.status == ERROR:  # the evaluator's fault, or the worker's: its traceback
            log.error("#%d on %s: %s", job.candidate.id, finished.worker, result.feedback)
        if result.status == UNAVAILABLE:
            self._sandbox_down(job, result.feedback)
            return
        self.unavailable_since = None
        value = score(result.metrics, self.spec.objectives) if result.ok else None
        if result.ok and value is None:
            names = [o.name for o in self.spec.objectives]
            result.status = ERROR
            result.feedback += f"\nthe evaluator reported no finite value for {names}"
        stepped = None if value is None else self.referee.review(job.kind, job.candidate, result)
        reward = self._reward(job, value)
        candidate = self.store.record_evaluation(
            job.candidate.id,
            result,
            kind=job.kind,
            score=value,
            input_seed=job.input_seed,
            worker=finished.worker,
            started_at=finished.started_at,
            finished_at=finished.finished_at,
            reward=reward,
        )
        if reward is not None and self.bandit is not None:
            self.bandit.rewarded(*reward)
        self._remember(candidate)
        if job.kind == "evaluate":
            self.recorded += 1
        self._update_search(candidate, job, result, stepped)

    def _reward(self, job: Job, value: float | None) -> tuple[str, float] | None:
        """What a bandit-chosen child earns its arm: its improvement over its parent."""
        arm = job.candidate.mutation.get("arm")
        if self.bandit is None or job.kind != "evaluate" or arm not in self.bandit.stats:
            return None
        parent = self._record(job.candidate.parent_ids[0])
        return arm, improvement_reward(value, parent.score)

    def _sandbox_down(self, job: Job, why: str) -> None:
        """Not the candidate's fault: keep it pending and retry it until the sandbox is back."""
        now = time.monotonic()
        if self.unavailable_since is None:
            self.unavailable_since = now
        self.retry_at = now + UNAVAILABLE_RETRY_S
        self.queue.appendleft(job)
        self._emit(Event("warning", f"sandbox unavailable, retrying #{job.candidate.id}: {why}"))

    def _update_search(
        self, candidate: CandidateRecord, job: Job, result: EvalResult, stepped: str | None
    ) -> None:
        if candidate.score is None:
            self.islands.discard(candidate.id)
            if job.kind == "evaluate":
                self.failed += 1
                self.broken.append(candidate.id)
            first_line = (result.feedback.strip().splitlines() or [""])[0][:120]
            self._emit(
                Event("failure", f"#{candidate.id} {candidate.status}: {first_line}", candidate.id)
            )
            return
        self.fruitless = 0
        if job.kind == "evaluate" and candidate.mutation.get("model"):
            self.to_finish.append(candidate.id)
        self.islands.add(candidate.id, candidate.score, self._homes(candidate.id, candidate.island))
        if stepped is not None:  # suspect whether or not it leads: measured again at once
            flagged = f"#{candidate.id} flagged: {stepped}; re-measuring"
            self._decide(candidate, Decision("remeasure", flagged))
        elif self.best is None or candidate.score > self.best[1]:
            self._decide(candidate, self.referee.judge(candidate))
        if job.kind == "evaluate" and self.recorded % self.spec.search.migration_interval == 0:
            for moved, island in self.islands.migrants():
                self.islands.migrate(moved, island)
                self.store.add_migration(self.run_name, moved, island)
                self._emit(Event("migration", f"#{moved} migrates to island {island}", moved))

    def _decide(self, candidate: CandidateRecord, decision: Decision) -> None:
        if decision.event == "remeasure":
            self.queue.appendleft(Job(candidate, "remeasure"))
        elif decision.event == "best":
            self.best = (candidate.id, candidate.score)  # type: ignore[assignment]
            write_best(self.results_dir, self.run_name, candidate.id, candidate.program)
        self._emit(Event(decision.event, decision.text, candidate.id))

    def _as_parent(self, candidate: CandidateRecord) -> Parent:
        """A parent as mutators see it; a model also gets its metrics and stage feedback."""
        if self.spec.llm is None:
            return Parent(candidate.id, candidate.program, candidate.score)
        latest = self.store.evaluations(candidate.id)[-1:]
        metrics = latest[0].metrics if latest else {}
        feedback = latest[0].feedback if latest else ""
        return Parent(candidate.id, candidate.program, candidate.score, metrics, feedback)

    # -- bookkeeping ------------------------------------------------------------------

    def _record(self, candidate_id: int) -> CandidateRecord:
        """A candidate, from memory when it was seen lately: parents are picked again and
        again, and the engine is the only writer, so what it remembers is never stale."""
        record = self.records.get(candidate_id)
        if record is None:
            record = self.store.candidate(candidate_id)
            assert record is not None
            self._remember(record)
        return record

    def _remember(self, record: CandidateRecord) -> None:
        self.records[record.id] = record
        self.records.move_to_end(record.id)
        if len(self.records) > RECORD_CACHE:
            self.records.popitem(last=False)

    def _flush_wall(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.flushed >= WALL_FLUSH_S:
            self.store.add_wall_time(self.run_name, now - self.flushed)
            self.flushed = now

    def _emit(self, event: Event) -> None:
        level = logging.WARNING if event.kind in ("warning", "failure") else logging.INFO
        log.log(level, "%s: %s", event.kind, event.text)
        if self.observer is not None:
            self.observer.event(event)

    def _spend_line(self) -> str:
        if self.spec.llm is None:
            return ""
        budget = self.spec.budget
        usd = f" of ${budget.usd:g}" if budget.usd is not None else ""
        tokens = f" of {budget.tokens:,}" if budget.tokens is not None else ""
        return f"models ${self.spent_usd:.4f}{usd}, {self.spent_tokens:,} tokens{tokens}"

    def _tick(self) -> None:
        if self.observer is None:
            return
        self.observer.tick(
            Snapshot(
                run_name=self.run_name,
                candidates=self.added,
                budget_candidates=self.spec.budget.candidates,
                elapsed_s=self.elapsed,
                budget_wall_s=self.spec.budget.wall_time_s,
                evaluated=self.recorded,
                failed=self.failed,
                in_flight=len(self.evals),
                best_id=self.best[0] if self.best else None,
                best_score=self.best[1] if self.best else None,
                spend=self._spend_line(),
            )
        )


def _mutation_record(record: dict, job: MutationJob) -> dict:
    if job.mutator == FINISHER:
        return {**record, "finisher": True}
    return {**record, "arm": job.arm} if job.arm else record


def _partners(record: dict) -> list[int]:
    partner = record.get("partner")
    return [partner] if isinstance(partner, int) else []
