"""What becomes of a proposal that came back: settled in the ledger with its outcome, and,
when it holds a program the run lacks, a new pending candidate.

A program the run already holds is a `duplicate`; a model-made one too close to a program
of the run (search.novelty_threshold) is `too_similar`, with its nearest neighbour; neither
costs an evaluation. Every outcome but an outage, a budget or an interruption counts
toward the fruitless stop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evolve.engine.budgets import Budgets
from evolve.engine.events import Event, EventLog
from evolve.mutators import LLM_OPERATORS, Proposal
from evolve.mutators.change_summary import summarize_change
from evolve.plugin.program import Program
from evolve.plugin.proposal_outcomes import Outcome
from evolve.propose.recent_attempts import RecentAttempts
from evolve.search.novelty import NoveltyIndex
from evolve.store import CandidateRecord, Opening, Settlement, Store

FINISHER = "finisher"  # the autotuner tuning a model-made child
# Model-made children that the novelty filter may reject: not `fix`, whose repair of a
# broken program is meant to be a small change to it.
FILTERED = frozenset(LLM_OPERATORS) - {"fix"}
# Outcomes that say nothing about the search: an outage or a budget, not a barren search.
NOT_FRUITLESS: frozenset[Outcome] = frozenset({"retries_exhausted", "budget", "interrupted"})


@dataclass(frozen=True)
class MutationJob:
    island: int
    parent: CandidateRecord
    mutator: str
    proposal_id: int | Opening  # Opening: made in the driver, not in the ledger yet
    arm: str | None = None  # the bandit's (operator, model) choice, when it chose


class Admission:
    def __init__(
        self,
        store: Store,
        run_name: str,
        *,
        novelty: NoveltyIndex,
        budgets: Budgets,
        events: EventLog,
        recent: RecentAttempts,
    ) -> None:
        self.store, self.run_name = store, run_name
        self.novelty, self.budgets, self.events = novelty, budgets, events
        self.recent = recent  # every settlement is told, for later prompts on the parent
        # Every program of the run by its code hash, so that a duplicate, or an autotuner
        # draw that repeats a program (most draws, once an autotuned run has converged),
        # costs no query to find.
        self.owners: dict[str, int] = {}

    def known(self, candidate_id: int, program: Program) -> None:
        """A program the run holds, from the store on resume or just added."""
        self.owners.setdefault(program.code_hash, candidate_id)

    def holds(self, program: Program) -> bool:
        """Whether the run holds this program already (or has it waiting)."""
        return program.code_hash in self.owners

    def admit(self, job: MutationJob, proposal: Proposal) -> CandidateRecord | None:
        """A child the run does not hold yet becomes a pending candidate; a duplicate, or a
        model-made child too close to a program of the run, is settled without one."""
        program = proposal.program
        summary = summarize_change(job.parent.program, program)
        owner = self.owners.get(program.code_hash)
        if owner is not None:
            detail = f"the same program as #{owner}"
            self.settle(job, "duplicate", proposal.calls, detail, summary, nearest=(owner, 1.0))
            return None
        if job.mutator in FILTERED and (near := self.novelty.too_similar(program)):
            detail = f"{near[1]:.0%} similar to #{near[0]}; not evaluated"
            self.settle(job, "too_similar", proposal.calls, detail, summary, nearest=near)
            self.events.emit(Event("info", f"{job.mutator} on #{job.parent.id}: {detail}"))
            return None
        child = self.store.add_candidate(
            self.run_name,
            program,
            parent_ids=[job.parent.id, *_partners(proposal.record)],
            island=job.island,
            generation=job.parent.generation + 1,
            mutation={**_mutation_record(proposal.record, job), "summary": summary},
            settlement=Settlement(job.proposal_id, "candidate", proposal.calls, summary=summary),
            known_new=True,  # `owners` holds every program of the run
        )
        if child is None:  # only another writer of this run could have added it meanwhile
            self.settle(job, "duplicate", proposal.calls, "the same program as another")
            return None
        self.recent.settled(
            job.parent.id, job.mutator, "candidate", summary=summary, child_id=child.id
        )
        self.known(child.id, program)
        self.novelty.add(child.id, program)
        return child

    def settle(
        self,
        job: MutationJob,
        outcome: Outcome,
        calls: Sequence[Any],
        detail: str = "",
        summary: str = "",
        nearest: tuple[int, float] | None = None,
    ) -> None:
        """A proposal that made no candidate, and why."""
        if outcome not in NOT_FRUITLESS:
            self.budgets.fruitless += 1
        self.recent.settled(
            job.parent.id,
            job.mutator,
            outcome,
            summary=summary,
            detail=detail,
            nearest_id=nearest[0] if nearest else None,
        )
        self.store.settle_proposal(
            Settlement(
                job.proposal_id,
                outcome,
                calls,
                detail=detail,
                summary=summary,
                nearest_id=nearest[0] if nearest else None,
                similarity=nearest[1] if nearest else None,
            )
        )


def _mutation_record(record: dict[str, Any], job: MutationJob) -> dict[str, Any]:
    if job.mutator == FINISHER:
        return {**record, "finisher": True}
    return {**record, "arm": job.arm} if job.arm else record


def _partners(record: dict[str, Any]) -> list[int]:
    partner = record.get("partner")
    return [partner] if isinstance(partner, int) else []
