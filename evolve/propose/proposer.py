"""Which operator makes the next proposal, on which parent; what becomes of it is
evolve/propose/admission.py's.

Proposals run in long-lived proposal workers (evolve/propose/workers.py), except the
autotuner's, which are made in the driver and concluded at once: a trip to a worker would
cost far more than the proposal. Each is opened in
the store's proposals ledger before it starts and settled with its outcome when it
returns; its model calls reach the store as they complete (evolve/propose/ledger_writer.py). A
model proposal gets the model keys with it and waits on the run's per-provider circuit
(evolve/llm/circuit.py); the bandit, when the task asks for one, chooses the operator and
model; the autotuner takes a share of proposals to tune the constants of model-made
children (the finisher); and `fix` works through the candidates that failed. Neither the
autotuner nor the finisher is given a program without @knob values, which they could not
vary: a parent without them goes to a model operator instead. A model-made child too close
to a program already in the run is rejected before it costs an evaluation. Model proposals
are spread over parents (evolve/propose/spread.py): a parent with its share in flight, or
cooled by a rejected proposal, is passed over for another pick.
"""

from __future__ import annotations

import logging
import random
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from evolve.engine.budgets import Budgets
from evolve.engine.candidate_cache import CandidateCache
from evolve.engine.events import Event, EventLog
from evolve.executors import Executor, WorkerLost
from evolve.mutators import LLM_OPERATORS, Autotuner, MutationRequest, Mutator, Proposal
from evolve.mutators.llm import key_names, model_config
from evolve.plugin.knobs import find_knobs
from evolve.plugin.program import Program, ProgramError
from evolve.plugin.secrets import Keys
from evolve.propose.admission import FINISHER, Admission, MutationJob
from evolve.propose.autotuner_draws import draw_new
from evolve.propose.briefing import Briefing
from evolve.propose.failure_streak import SAME_FAILURES, FailureStreak
from evolve.propose.making import MutationFailed
from evolve.propose.recent_attempts import RecentAttempts
from evolve.propose.services import RunServices
from evolve.propose.spread import Spread
from evolve.propose.workers import ProposalWorkers
from evolve.search.bandit import ArmStats, CostAwareBandit, arm_name, split_arm
from evolve.search.novelty import NoveltyIndex
from evolve.search.strategy import Pick, SearchStrategy
from evolve.store import CandidateRecord, Opening, Store
from evolve.task.schema import TaskSpec

log = logging.getLogger("evolve.propose.proposer")

PICK_TRIES = 8  # parent picks before a proposal waits for a parent open to it
FINISH_KEPT = 16  # the latest model-made children that the finisher cycles through
BROKEN_KEPT = 64  # failed candidates remembered for the fix operator


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
        services: RunServices,
        slots: int,
        executor: Executor,
    ) -> None:
        """`slots`: the most proposals made at once; `executor`, where the proposal workers
        run."""
        self.spec, self.store, self.run_name = spec, store, run_name
        self.strategy, self.candidates = strategy, candidates
        self.budgets, self.events = budgets, events
        # The autotuner runs here, in the driver (see proposal_making.make_proposal); the others in
        # the proposal workers, which start with the run.
        self.mutators = {m.name: (mutators[m.name], m.weight) for m in spec.mutators}
        remote = {name: m for name, m in mutators.items() if not isinstance(m, Autotuner)}
        providers = [model_config(m).provider for m in spec.llm.models] if spec.llm else []
        self.workers = ProposalWorkers(remote, slots, services, providers, executor)
        self.keys = Keys.read(key_names(spec.llm))  # for model proposals only
        self.bandit = self._restore_bandit() if spec.llm and spec.llm.adaptive else None
        model_made = any(name in LLM_OPERATORS for name in self.mutators)
        self.novelty = NoveltyIndex(spec.search.novelty_threshold, needed=model_made)
        self.spread = Spread(spec.search.in_flight_per_parent)
        recent = RecentAttempts(store, candidates, spec.search.history)
        self.briefing = Briefing(
            spec,
            store,
            run_name,
            strategy=strategy,
            candidates=candidates,
            novelty=self.novelty,
            budgets=budgets,
            recent=recent,
        )
        self.admission = Admission(
            store, run_name, novelty=self.novelty, budgets=budgets, events=events, recent=recent
        )
        self.finisher = Autotuner({})
        self.in_flight: dict[Future[Any], MutationJob] = {}
        # Proposals made in the driver, which the engine concludes in the same turn.
        self.made: list[tuple[MutationJob, Proposal | MutationFailed]] = []
        # Proposals opened in the store's current turn, sent once it has committed.
        self.outbox: list[tuple[MutationJob, int, MutationRequest]] = []
        # Failed candidates waiting for the `fix` operator, each tried once, newest kept.
        self.broken: deque[int] = deque(maxlen=BROKEN_KEPT)
        # Model-made children that passed, tuned in turn by the autotuner (the finisher).
        self.to_finish: deque[int] = deque(maxlen=FINISH_KEPT)
        self.proposals = self.finishes = 0
        # Why the model path cannot work, once it is known: the run then stops.
        self.streak = FailureStreak(spec.llm.same_failures if spec.llm else SAME_FAILURES)

    def restore(self, programs: Sequence[tuple[int, Program]]) -> None:
        """Close what a stopped driver left in flight, and index the run's `programs`."""
        if interrupted := self.store.interrupt_proposals(self.run_name):
            self.events.emit(
                Event("info", f"{interrupted} proposal(s) in flight when the run stopped")
            )
            if self.bandit is not None:  # closing them charged their arms in the store
                self.bandit = self._restore_bandit()
        for candidate_id, program in programs:
            self.novelty.add(candidate_id, program)
            self.admission.known(candidate_id, program)

    def submit(self, rng: random.Random, added: int) -> bool:
        """Start one proposal; False when none can start now (nothing scored yet, only
        `fix` with nothing broken, or no model budget left). `added`: candidates so far."""
        if self._finisher_due():
            return self._submit_finisher(rng)
        started = [*self.in_flight.values(), *(job for job, _, _ in self.outbox)]
        llm_in_flight = sum(job.mutator in LLM_OPERATORS for job in started)
        names = [n for n in self.mutators if n != "fix" or self.broken]
        if not self.spread.room(llm_in_flight):  # the cheap operators may go on meanwhile
            names = [n for n in names if n not in LLM_OPERATORS]
        if not names:
            return False
        name = rng.choices(names, weights=[self.mutators[n][1] for n in names])[0]
        arm = model = None
        if name in LLM_OPERATORS:
            if not self.budgets.affordable(llm_in_flight):
                return False
            if self.bandit is not None:
                allowed = [a for a in self.bandit.weights if self._may(a)]
                arm = self.bandit.choose(rng, allowed)
                name, model = split_arm(arm)
        if name == "fix":  # the repaired program goes back where the broken one was
            broken = self.candidates.get(self.broken.popleft())
            pick: Pick | None = self.strategy.repair(broken.id, broken.island)
        else:
            pick = self._open_pick(rng, isinstance(self.mutators[name][0], Autotuner))
        if pick is None:
            return False  # nothing scored yet, or no parent open to a model proposal now
        parent = self.candidates.get(pick.parent_id)
        if isinstance(self.mutators[name][0], Autotuner) and not tunable(parent.program):
            instead = self._instead_of_autotuner(rng, names, llm_in_flight)
            if instead is None:
                return False
            name, arm, model = instead
        if arm is not None and self.bandit is not None:
            self.bandit.pulled(arm)
        partner_id = self.briefing.partner(pick, rng) if name == "crossover" else None
        request = MutationRequest(self.briefing.parent(parent), (), rng.getrandbits(63), model)
        if name in LLM_OPERATORS:
            request = MutationRequest(
                request.parent,
                self.briefing.others(pick, partner_id),
                request.seed,
                model,
                attempts=(attempts := self.briefing.attempts(parent.id)),
                digest=self.briefing.run_digest(added),
                token_cap=self.briefing.token_cap(llm_in_flight),
                in_flight=self.spread.being_tried(parent.id),
                metric_names=self.briefing.metric_names,
                neighbours=self.briefing.near(parent, attempts),
                racing=self.briefing.racing(parent, self.spread.parents_in_flight()),
            )
        self.proposals += 1
        parents = [parent.id] if partner_id is None else [parent.id, partner_id]
        self._start(name, request, pick.island, parent, parents, arm)
        return True

    def _open_pick(self, rng: random.Random, tuner: bool) -> Pick | None:
        """The strategy's pick, picked again while its parent is not open to a model
        proposal (see evolve/propose/spread.py); the autotuner takes any parent it can
        vary. None when nothing is scored, or no open parent came up."""
        for _ in range(PICK_TRIES):
            pick = self.strategy.pick(rng)
            if pick is None:
                return None
            if tuner and tunable(self.candidates.get(pick.parent_id).program):
                return pick
            if self.spread.open_to(pick.parent_id):
                return pick
        return None

    def finish(self, future: Future[Any], *, room: bool) -> CandidateRecord | None:
        """A proposal worker's answer, settled (see `conclude`)."""
        job = self.in_flight.pop(future)
        self.workers.done(future)
        try:
            proposal = future.result()
        except WorkerLost as exc:
            proposal = MutationFailed(f"mutation task lost: {exc}")
        return self.conclude(job, proposal, room=room)

    def take_made(self) -> list[tuple[MutationJob, Proposal | MutationFailed]]:
        """The proposals made in the driver since the last call, for `conclude`."""
        made, self.made = self.made, []
        return made

    def conclude(
        self, job: MutationJob, proposal: Proposal | MutationFailed, *, room: bool
    ) -> CandidateRecord | None:
        """Settle a finished proposal in the ledger; the new candidate, if it is new, not
        too like one the run holds, and the candidate budget (`room`) takes it. Its model
        calls are counted against the budgets whatever happened: they were paid for."""
        if isinstance(proposal, MutationFailed):
            if proposal.trace:
                log.error("%s crashed on #%d:\n%s", job.mutator, job.parent.id, proposal.trace)
            if proposal.over_budget:  # the run stops on that budget, saying why once
                self.budgets.refuse(proposal.reason)
            elif proposal.outcome not in ("interrupted", "refused"):  # the run's stop says it
                text = f"{job.mutator} failed on #{job.parent.id}: {proposal.reason}"
                self.events.emit(Event("failure", text))
            self._ended(job, rejected=False)
            self.admission.settle(job, proposal.outcome, proposal.calls, detail=proposal.reason)
            # A crash or a lost task brings no calls back; the ledger writer stored them.
            paid: Sequence[Any] = proposal.calls
            if not paid and job.mutator in LLM_OPERATORS and isinstance(job.proposal_id, int):
                paid = self.store.proposal_calls(job.proposal_id)
            self._spend(paid, job.arm)
            if job.mutator in LLM_OPERATORS:
                self.streak.failed(proposal.outcome, proposal.reason, paid)
            return None
        self._spend(proposal.calls, job.arm)
        if job.mutator in LLM_OPERATORS:
            self.streak.produced()
        if not room:
            self._ended(job, rejected=False)
            self.admission.settle(
                job, "budget", proposal.calls, detail="the candidate budget is full"
            )
            return None
        child = self.admission.admit(job, proposal)
        self._ended(job, rejected=child is None)
        if child is not None:
            self.briefing.outlines.note(child)
            self.briefing.neighbours.note(child)
        return child

    def evaluated(self, candidate: CandidateRecord) -> None:
        """A candidate as its latest evaluation left it, for the run's digest and for how
        many model proposals the population has room for."""
        self.briefing.outlines.note(candidate)
        self.spread.evaluated(candidate.id, candidate.score is not None)

    def failed(self, candidate: CandidateRecord) -> None:
        """A child that failed its evaluation, for `fix` to try once."""
        self.broken.append(candidate.id)

    def passed(self, candidate: CandidateRecord) -> None:
        """A child that passed: one a model made is tuned later by the finisher, where it
        has @knob values to tune."""
        if candidate.mutation.get("model") and tunable(candidate.program):
            self.to_finish.append(candidate.id)

    def _start(
        self,
        name: str,
        request: MutationRequest,
        island: int,
        parent: CandidateRecord,
        parents: Sequence[int],
        arm: str | None = None,
    ) -> None:
        """Make the proposal here, to be concluded at once and written in one row; or open
        it in the ledger, for `send` to hand to a proposal worker."""
        mutator = self.finisher if name == FINISHER else self.mutators[name][0]
        if isinstance(mutator, Autotuner):
            opening = Opening(self.run_name, name, tuple(parents), island, arm)
            job = MutationJob(island, parent, name, opening, arm)
            self.made.append((job, draw_new(mutator, request, self.admission.holds)))
            return
        proposal_id = self.store.open_proposal(
            self.run_name, operator=name, parent_ids=parents, island=island, arm=arm
        )
        job = MutationJob(island, parent, name, proposal_id, arm)
        self.outbox.append((job, proposal_id, request))
        if name in LLM_OPERATORS:
            self.spread.started(proposal_id, parent.id, _label(name, request.model))

    @property
    def pending(self) -> int:
        """Proposals started and not concluded: in flight, or waiting to be sent."""
        return len(self.in_flight) + len(self.outbox)

    @property
    def full(self) -> bool:
        """Whether every slot has a proposal, and one more waits for each: a reply's slot
        goes to a waiting proposal in the worker, without the driver in between."""
        return self.pending >= self.workers.capacity

    def send(self) -> None:
        """Send the proposals opened since the last call to the proposal workers; called
        once the transaction that opened them has committed, since their model calls are
        written under them from elsewhere (evolve/propose/ledger_writer.py) and must find them."""
        if self.outbox:
            self.store.wait_for_commits()
        for job, proposal_id, request in self.outbox:
            model_made = job.mutator in LLM_OPERATORS
            keys = self.keys if model_made else Keys()
            ref = self.workers.submit(job.mutator, request, keys, proposal_id, model_made)
            self.in_flight[ref] = job
        self.outbox = []

    def start(self) -> None:
        """Start the proposal workers while the seed is evaluated, where any are needed."""
        self.workers.start()

    def stop(self) -> None:
        """The run is stopping: no proposal still waiting for a model slot is sent."""
        self.workers.stop()

    def close(self) -> None:
        """Proposals still in flight are abandoned; the ledger closes them as interrupted."""
        self.workers.close()

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

    def _instead_of_autotuner(
        self, rng: random.Random, names: Sequence[str], llm_in_flight: int
    ) -> tuple[str, str | None, str | None] | None:
        """The operator, arm and model for a parent without @knob values, which the
        autotuner drew but cannot vary: a model operator by weight (or the bandit's arm),
        but not `fix`, which works on a broken candidate rather than this parent. None
        where the task has no such operator, or no model budget is left."""
        others = [n for n in names if n != "fix" and not isinstance(self.mutators[n][0], Autotuner)]
        if not others or not self.budgets.affordable(llm_in_flight):
            return None
        if not self.spread.room(llm_in_flight):
            return None
        if self.bandit is None:
            return rng.choices(others, weights=[self.mutators[n][1] for n in others])[0], None, None
        arm = self.bandit.choose(rng, [a for a in self.bandit.weights if split_arm(a)[0] != "fix"])
        name, model = split_arm(arm)
        return name, arm, model

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
        request = MutationRequest(self.briefing.parent(parent), (), rng.getrandbits(63))
        self._start(FINISHER, request, parent.island, parent, [parent.id])
        return True

    def _ended(self, job: MutationJob, *, rejected: bool) -> None:
        """A model proposal settled; `rejected` before any evaluation, as a duplicate or
        too similar."""
        if job.mutator in LLM_OPERATORS and isinstance(job.proposal_id, int):
            self.spread.ended(job.proposal_id, rejected=rejected)

    def _spend(self, calls: Sequence, arm: str | None) -> None:
        usd = self.budgets.spend(calls)
        if arm is not None and self.bandit is not None:
            self.bandit.charged(arm, usd)


def _label(operator: str, model: str | None) -> str:
    """How a proposal in flight is named to later prompts on its parent."""
    return f"{operator} by {model}" if model else operator


def tunable(program: Program) -> bool:
    """Whether `program` has @knob values for the autotuner to vary; a model-made one whose
    annotations do not parse has none it may use."""
    try:
        return bool(find_knobs(program))
    except ProgramError:
        return False
