"""The proposals ledger: each request to an operator, its model calls, and its outcome.

A proposal is opened before its task starts, its calls are written one at a time as they
complete (by evolve/ledger_writer.py, from wherever the model was called), and it is
settled with an outcome when its result reaches the driver. So a driver killed at any
moment leaves every paid call in the store, under its proposal, and `--resume` closes the
proposals it left open as `interrupted`, spending exactly what the store says was spent.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from evolve.llm import LLMCall as LLMCallRecordable
from evolve.proposal_outcomes import OUTCOMES, Outcome
from evolve.store.database import Database
from evolve.store.ledger import call_rows, locked_arm, pull
from evolve.store.records import LLMCallRecord, ProposalRecord
from evolve.store.schema import Candidate, LLMCall, Proposal


@dataclass(frozen=True)
class Settlement:
    """How a proposal ended, as the driver learnt it from the proposal's result. `calls`
    are all the calls the proposal returned: any the ledger writer did not store yet are
    written with it, so none is lost even if streaming failed."""

    proposal_id: int
    outcome: Outcome
    calls: Sequence[LLMCallRecordable] = ()
    detail: str = ""
    summary: str = ""
    nearest_id: int | None = None
    similarity: float | None = None


class Proposals(Database):
    """The store's proposals and the calls grouped under them."""

    def open_proposal(
        self,
        run_name: str,
        *,
        operator: str,
        parent_ids: Sequence[int],
        island: int,
        arm: str | None = None,
    ) -> int:
        """`arm`: the bandit's (operator, model) choice, charged when the proposal ends."""
        row = Proposal(
            run_name=run_name,
            operator=operator,
            models=[],
            parent_ids=list(parent_ids),
            parent_id=parent_ids[0] if parent_ids else None,
            island=island,
            arm=arm,
            outcome=None,
            detail="",
            summary="",
            calls=0,
            cost_usd=0.0,
            tokens=0,
            created_at=time.time(),
        )
        with self._write() as session, session.begin():
            session.add(row)
            session.flush()
            return row.id

    def add_proposal_call(self, proposal_id: int, call: LLMCallRecordable) -> None:
        """One completed model call, written the moment it is known, once: the settlement
        may have stored it already. One that arrives after its proposal was settled is
        added to the proposal's totals and to its bandit arm's cost."""
        with self._write() as session, session.begin():
            proposal = session.get(Proposal, proposal_id, with_for_update=True)
            if proposal is None:
                raise KeyError(f"no proposal with id {proposal_id}")
            if call.call_id in _stored_ids(session, proposal_id):
                return
            session.add_all(
                call_rows(proposal.run_name, proposal.operator, [call], proposal_id=proposal_id)
            )
            if proposal.outcome is not None:
                session.flush()
                _total(session, proposal)
                if proposal.arm is not None:
                    locked_arm(session, proposal.run_name, proposal.arm).cost_usd += call.cost_usd

    def settle_proposal(self, settlement: Settlement) -> None:
        """A proposal that made no candidate: its outcome, and the arm's pull."""
        with self._write() as session, session.begin():
            settle(session, settlement, candidate_id=None)

    def interrupt_proposals(self, run_name: str) -> int:
        """Close the proposals a stopped or killed driver left open, from the calls they
        stored, charging their bandit arms; how many there were."""
        query = select(Proposal).where(Proposal.run_name == run_name, Proposal.outcome.is_(None))
        with self._write() as session, session.begin():
            rows = list(session.scalars(query.with_for_update()))
            for row in rows:
                _close(session, row, "interrupted", candidate_id=None)
                row.detail = "in flight when the run stopped"
        return len(rows)

    def recent_attempts(self, parent_id: int, limit: int) -> list[ProposalRecord]:
        """The parent's latest settled proposals, newest first, with their children as they
        stand now: what the next prompt on this parent should not repeat."""
        query = (
            select(Proposal, Candidate)
            .outerjoin(Candidate, Candidate.id == Proposal.candidate_id)
            .where(Proposal.parent_id == parent_id, Proposal.outcome.is_not(None))
            .order_by(Proposal.id.desc())
            .limit(limit)
        )
        with self._read() as session:
            return [ProposalRecord.of(row, child) for row, child in session.execute(query)]

    def proposals(self, run_name: str) -> list[ProposalRecord]:
        """The run's proposals, oldest first."""
        query = (
            select(Proposal, Candidate)
            .outerjoin(Candidate, Candidate.id == Proposal.candidate_id)
            .where(Proposal.run_name == run_name)
            .order_by(Proposal.id)
        )
        with self._read() as session:
            return [ProposalRecord.of(row, child) for row, child in session.execute(query)]

    def proposal_outcomes(self, run_name: str) -> dict[str, int]:
        """How many proposals ended each way; in-flight ones count under "in_flight"."""
        query = (
            select(Proposal.outcome, func.count())
            .where(Proposal.run_name == run_name)
            .group_by(Proposal.outcome)
        )
        with self._read() as session:
            return {outcome or "in_flight": n for outcome, n in session.execute(query)}

    def proposal_calls(self, proposal_id: int) -> list[LLMCallRecord]:
        query = select(LLMCall).where(LLMCall.proposal_id == proposal_id).order_by(LLMCall.id)
        with self._read() as session:
            return [LLMCallRecord.of(row) for row in session.scalars(query)]


def settle(session: Session, settlement: Settlement, *, candidate_id: int | None) -> None:
    """Inside the caller's transaction: store the calls not streamed yet, link the calls
    to the child, close the proposal and charge the bandit arm."""
    if settlement.outcome not in OUTCOMES:
        raise ValueError(f"{settlement.outcome!r} is no proposal outcome; see {OUTCOMES}")
    row = session.get(Proposal, settlement.proposal_id, with_for_update=True)
    if row is None:
        raise KeyError(f"no proposal with id {settlement.proposal_id}")
    stored = _stored_ids(session, row.id)
    missing = [call for call in settlement.calls if call.call_id not in stored]
    session.add_all(call_rows(row.run_name, row.operator, missing, proposal_id=row.id))
    session.flush()
    _close(session, row, settlement.outcome, candidate_id=candidate_id)
    row.detail = settlement.detail
    row.summary = settlement.summary
    row.nearest_id = settlement.nearest_id
    row.similarity = settlement.similarity


def _stored_ids(session: Session, proposal_id: int) -> set[str | None]:
    query = select(LLMCall.call_id).where(LLMCall.proposal_id == proposal_id)
    return set(session.scalars(query))


def _close(session: Session, row: Proposal, outcome: str, *, candidate_id: int | None) -> None:
    """Outcome, child, the totals of the calls stored under the proposal, and the pull of
    its bandit arm."""
    if candidate_id is not None:
        session.execute(
            update(LLMCall).where(LLMCall.proposal_id == row.id).values(candidate_id=candidate_id)
        )
    row.outcome = outcome
    row.candidate_id = candidate_id
    row.finished_at = time.time()
    _total(session, row)
    pull(session, row.run_name, row.arm, row.cost_usd)


def _total(session: Session, row: Proposal) -> None:
    """The proposal's calls, cost, tokens and models, from the calls stored under it."""
    calls, usd, tokens = session.execute(
        select(
            func.count(),
            func.coalesce(func.sum(LLMCall.cost_usd), 0.0),
            func.coalesce(func.sum(LLMCall.input_tokens + LLMCall.output_tokens), 0),
        ).where(LLMCall.proposal_id == row.id)
    ).one()
    models = session.scalars(
        select(LLMCall.provider + ":" + LLMCall.model)
        .where(LLMCall.proposal_id == row.id)
        .distinct()
    )
    row.models = sorted(models)
    row.calls, row.cost_usd, row.tokens = int(calls), float(usd), int(tokens)
