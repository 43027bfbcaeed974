"""Which operator makes the next proposal, on which parent, and what becomes of it.

Proposals run as Ray tasks that take no CPU slot (evolve/workers.py). A model proposal
gets the model keys with it; the bandit, when the task asks for one, chooses the operator
and model; the autotuner takes a share of proposals to tune the constants of model-made
children (the finisher); and `fix` works through the candidates that failed.
"""

from __future__ import annotations

import logging
import random
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import ray
from ray.exceptions import RayError

from evolve import workers
from evolve.budgets import Budgets
from evolve.candidate_cache import CandidateCache
from evolve.events import Event, EventLog
from evolve.mutators import LLM_OPERATORS, Autotuner, MutationRequest, Mutator, Parent
from evolve.mutators.llm import key_names, model_config
from evolve.search.bandit import ArmStats, CostAwareBandit, arm_name, split_arm
from evolve.search.strategy import Pick, SearchStrategy
from evolve.secrets import Keys
from evolve.store import CandidateRecord, Store
from evolve.task import TaskSpec

log = logging.getLogger("evolve.proposals")

FINISHER = "finisher"  # the autotuner tuning a model-made child
FINISH_KEPT = 16  # the latest model-made children that the finisher cycles through
BROKEN_KEPT = 64  # failed candidates remembered for the fix operator


@dataclass(frozen=True)
class MutationJob:
    island: int
    parent: CandidateRecord
    mutator: str
    arm: str | None = None  # the bandit's (operator, model) choice, when it chose


class Proposer:
    def __init__(
        self,
        spec: TaskSpec,
        mutators: Mapping[str, Mutator],
        *,
        store: Store,
        run_name: str,
        strategy: SearchStrategy,
        candidates: CandidateCache,
        budgets: Budgets,
        events: EventLog,
    ) -> None:
        self.spec, self.store, self.run_name = spec, store, run_name
        self.strategy, self.candidates = strategy, candidates
        self.budgets, self.events = budgets, events
        self.mutators = {m.name: (ray.put(mutators[m.name]), m.weight) for m in spec.mutators}
        self.keys = Keys.read(key_names(spec.llm))  # for model proposals only
        self.bandit = self._restore_bandit() if spec.llm and spec.llm.adaptive else None
        self.finisher = ray.put(Autotuner({}))
        self.in_flight: dict[ray.ObjectRef, MutationJob] = {}
        # Failed candidates waiting for the `fix` operator, each tried once, newest kept.
        self.broken: deque[int] = deque(maxlen=BROKEN_KEPT)
        # Model-made children that passed, tuned in turn by the autotuner (the finisher).
        self.to_finish: deque[int] = deque(maxlen=FINISH_KEPT)
        self.proposals = self.finishes = 0

    def submit(self, rng: random.Random) -> bool:
        """Start one proposal; False when none can start now (nothing scored yet, only
        `fix` with nothing broken, or no model budget left)."""
        if self._finisher_due():
            return self._submit_finisher(rng)
        names = [n for n in self.mutators if n != "fix" or self.broken]
        if not names:
            return False
        name = rng.choices(names, weights=[self.mutators[n][1] for n in names])[0]
        arm = model = None
        if name in LLM_OPERATORS:
            in_flight = sum(job.mutator in LLM_OPERATORS for job in self.in_flight.values())
            if not self.budgets.affordable(in_flight):
                return False
            if self.bandit is not None:
                allowed = [a for a in self.bandit.weights if self._may(a)]
                arm = self.bandit.choose(rng, allowed)
                name, model = split_arm(arm)
        if name == "fix":  # the repaired program goes back where the broken one was
            broken = self.candidates.get(self.broken.popleft())
            pick: Pick | None = self.strategy.repair(broken.id, broken.island)
        else:
            pick = self.strategy.pick(rng)
        if pick is None:
            return False  # nothing scored yet: wait for the seed
        parent = self.candidates.get(pick.parent_id)
        partner_id = self.strategy.partner(pick, rng)
        others = () if partner_id is None else (self._as_parent(self.candidates.get(partner_id)),)
        request = MutationRequest(self._as_parent(parent), others, rng.getrandbits(63), model)
        self.proposals += 1
        keys = self.keys if name in LLM_OPERATORS else Keys()
        ref = workers.propose.remote(self.mutators[name][0], request, keys)
        self.in_flight[ref] = MutationJob(pick.island, parent, name, arm)
        return True

    def finish(self, ref: ray.ObjectRef, *, room: bool) -> CandidateRecord | None:
        """Store what a finished proposal made; the new candidate, if it is new and the
        candidate budget (`room`) takes it. Model calls are recorded whatever happened:
        they were paid for."""
        job = self.in_flight.pop(ref)
        try:
            proposal = ray.get(ref)
        except RayError as exc:
            proposal = workers.MutationFailed(f"mutation task lost: {exc}")
        if isinstance(proposal, workers.MutationFailed):
            if proposal.trace:
                log.error("%s crashed on #%d:\n%s", job.mutator, job.parent.id, proposal.trace)
            self._record_calls(proposal.calls, job)
            self.budgets.fruitless += 1
            self.events.emit(
                Event("failure", f"{job.mutator} failed on #{job.parent.id}: {proposal.reason}")
            )
            return None
        if not room:
            self._record_calls(proposal.calls, job)
            return None
        self._spend(proposal.calls, job.arm)
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
            self.budgets.fruitless += 1  # already evaluated: never evaluate a program twice
            self.store.record_llm_calls(
                self.run_name, proposal.calls, operator=job.mutator, arm=job.arm
            )
        return child

    def failed(self, candidate: CandidateRecord) -> None:
        """A child that failed its evaluation, for `fix` to try once."""
        self.broken.append(candidate.id)

    def passed(self, candidate: CandidateRecord) -> None:
        """A child that passed: one a model made is tuned later by the finisher."""
        if candidate.mutation.get("model"):
            self.to_finish.append(candidate.id)

    def _restore_bandit(self) -> CostAwareBandit:
        """Arms are the configured model operators times the models; what they learnt before
        a crash or Ctrl-C comes back from the store."""
        llm = self.spec.llm
        if llm is None:
            raise ValueError("an adaptive choice of models needs the task's llm section")
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

    def _may(self, arm: str) -> bool:
        """`fix` needs a broken candidate to work on."""
        return split_arm(arm)[0] != "fix" or bool(self.broken)

    def _finisher_due(self) -> bool:
        """Structure from the model, constants from the tuner: the autotuner takes its share
        of proposals to tune the knobs of model-made children that passed."""
        share = self.spec.llm.finisher_share if self.spec.llm else 0.0
        return bool(self.to_finish) and self.finishes < share * (self.proposals + self.finishes)

    def _submit_finisher(self, rng: random.Random) -> bool:
        parent = self.candidates.get(self.to_finish[0])
        self.to_finish.rotate(-1)
        self.finishes += 1
        request = MutationRequest(self._as_parent(parent), (), rng.getrandbits(63))
        ref = workers.propose.remote(self.finisher, request, Keys())
        self.in_flight[ref] = MutationJob(parent.island, parent, FINISHER)
        return True

    def _as_parent(self, candidate: CandidateRecord) -> Parent:
        """A parent as mutators see it; a model also gets its metrics and stage feedback."""
        if self.spec.llm is None:
            return Parent(candidate.id, candidate.program, candidate.score)
        latest = self.store.evaluations(candidate.id)[-1:]
        metrics = latest[0].metrics if latest else {}
        feedback = latest[0].feedback if latest else ""
        return Parent(candidate.id, candidate.program, candidate.score, metrics, feedback)

    def _record_calls(self, calls: Sequence, job: MutationJob) -> None:
        self._spend(calls, job.arm)
        self.store.record_llm_calls(self.run_name, calls, operator=job.mutator, arm=job.arm)

    def _spend(self, calls: Sequence, arm: str | None) -> None:
        usd = self.budgets.spend(calls)
        if arm is not None and self.bandit is not None:
            self.bandit.pulled(arm, usd)


def _mutation_record(record: dict, job: MutationJob) -> dict:
    if job.mutator == FINISHER:
        return {**record, "finisher": True}
    return {**record, "arm": job.arm} if job.arm else record


def _partners(record: dict) -> list[int]:
    partner = record.get("partner")
    return [partner] if isinstance(partner, int) else []
