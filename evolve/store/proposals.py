"""The proposals ledger: each request to an operator, its model calls, and its outcome.

A proposal is opened before its task starts, its calls are written one at a time as they
complete (by evolve/propose/ledger_writer.py, from wherever the model was called), and it is
settled with an outcome when its result reaches the driver. So a driver killed at any
moment leaves every paid call in the store, under its proposal, and `--resume` closes the
proposals it left open as `interrupted`, spending exactly what the store says was spent.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, func, select

from evolve.llm import LLMCall as LLMCallRecordable
from evolve.plugin.proposal_outcomes import OUTCOMES, Outcome
from evolve.store import statements
from evolve.store.database import Database
from evolve.store.deferred import defer
from evolve.store.ledger import charge_arm, insert_calls, lose_calls_in_flight
from evolve.store.records import LLMCallRecord, ProposalRecord
from evolve.store.schema import Candidate, LLMCall, Proposal


@dataclass(frozen=True)
class Opening:
    """A proposal as it was asked for."""

    run_name: str
    operator: str
    parent_ids: tuple[int, ...]
    island: int
    arm: str | None = None  # the bandit's (operator, model) choice, charged when it ends

    def row(self) -> dict[str, object]:
        """The proposal's row as it opens: no outcome, no calls."""
        return {
            "run_name": self.run_name,
            "operator": self.operator,
            "models": [],
            "parent_ids": list(self.parent_ids),
            "parent_id": self.parent_ids[0] if self.parent_ids else None,
            "island": self.island,
            "arm": self.arm,
            "outcome": None,
            "candidate_id": None,
            "detail": "",
            "summary": "",
            "calls": 0,
            "cost_usd": 0.0,
            "tokens": 0,
            "created_at": time.time(),
        }


@dataclass(frozen=True)
class Settlement:
    """How a proposal ended, as the driver learnt it from the proposal's result. `calls`
    are all the calls the proposal returned: any the ledger writer did not store yet are
    written with it, so none is lost even if streaming failed. `proposal_id` is an open
    proposal's id or, for one made in the driver and concluded at once, its Opening: the
    whole proposal is then written as one row."""

    proposal_id: int | Opening
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
        opening = Opening(run_name, operator, tuple(parent_ids), island, arm)
        with self._writing() as connection:
            return connection.execute(statements.OPEN_PROPOSAL, opening.row()).scalar_one()

    def add_proposal_call(self, proposal_id: int, call: LLMCallRecordable) -> None:
        """One completed model call, written the moment it is known, once: the settlement
        may have stored it already. One that arrives after its proposal was settled is
        added to the proposal's totals and to its bandit arm's cost."""
        self.add_proposal_calls([(proposal_id, call)])

    def add_proposal_calls(self, calls: Sequence[tuple[int, LLMCallRecordable]]) -> None:
        """Several calls as `add_proposal_call` writes one, in one transaction: all of them
        or, when one names no proposal (KeyError), none."""
        with self._writing() as connection:
            for proposal_id, call in calls:
                locking = {"proposal_id": proposal_id}
                row = connection.execute(statements.LOCK_PROPOSAL, locking).one_or_none()
                if row is None:
                    raise KeyError(f"no proposal with id {proposal_id}")
                added = insert_calls(
                    connection, row.run_name, row.operator, [call], proposal_id=proposal_id
                )
                if added and row.outcome is not None:
                    _total(connection, proposal_id)
                    if row.arm is not None:
                        charge_arm(connection, row.run_name, row.arm, cost_usd=call.cost_usd)

    def settle_proposal(self, settlement: Settlement) -> None:
        """A proposal that made no candidate: its outcome, and the arm's pull."""
        with self._writing() as connection:
            settle(connection, settlement, candidate_id=None)

    def interrupt_proposals(self, run_name: str) -> int:
        """Close the proposals a stopped or killed driver left open, from the calls they
        stored, charging their bandit arms, and mark the requests it left in flight lost;
        how many proposals there were."""
        query = select(Proposal.id).where(Proposal.run_name == run_name, Proposal.outcome.is_(None))
        detail = "in flight when the run stopped"
        with self._writing() as connection:
            lose_calls_in_flight(connection, run_name)
            open_ids = list(connection.scalars(query.order_by(Proposal.id)))
            for proposal_id in open_ids:
                settle(connection, Settlement(proposal_id, "interrupted", detail=detail))
        return len(open_ids)

    def recent_attempts(self, parent_id: int, limit: int) -> list[ProposalRecord]:
        """The parent's latest settled proposals, newest first, with their children as they
        stand now: what the next prompt on this parent should not repeat."""
        values = {"parent_id": parent_id, "limit": limit}
        with self._reading() as connection:
            rows = connection.execute(statements.RECENT_ATTEMPTS, values)
            return [ProposalRecord.of(row, row if row.status else None) for row in rows]

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

    def each_proposal(self, run_name: str) -> Iterator[ProposalRecord]:
        """The run's proposals with their children's status and score, oldest first, a
        page at a time, without loading the children's files: for exports."""
        table = Proposal.__table__
        query = (
            select(*table.c, Candidate.status, Candidate.score)
            .outerjoin(Candidate, Candidate.id == table.c.candidate_id)
            .where(table.c.run_name == run_name)
        )
        return self._pages(
            query, table.c.id, lambda row: ProposalRecord.of(row, row if row.status else None)
        )

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


def settle(
    connection: Connection, settlement: Settlement, *, candidate_id: int | None = None
) -> None:
    """Inside the caller's transaction: close the proposal (which locks its row against the
    ledger writer), store the calls not streamed yet, total them, link them to the child
    and charge the bandit arm."""
    if settlement.outcome not in OUTCOMES:
        raise ValueError(f"{settlement.outcome!r} is no proposal outcome; see {OUTCOMES}")
    closing = {
        "outcome": settlement.outcome,
        "finished_at": time.time(),
        "detail": settlement.detail,
        "summary": settlement.summary,
        "nearest_id": settlement.nearest_id,
        "similarity": settlement.similarity,
    }
    if isinstance(settlement.proposal_id, Opening):
        # Made in the driver, by a mutator that calls no model: nothing will refer to its
        # row, so it is written with the turn.
        opening = settlement.proposal_id
        if settlement.calls:
            raise ValueError("a proposal made in the driver has no model calls to settle")
        values = {**opening.row(), **closing, "candidate_id": candidate_id}
        defer(connection, statements.ADD_PROPOSAL, values)
        if opening.arm is not None:
            charge_arm(connection, opening.run_name, opening.arm, pulls=1)
        return
    proposal_id = settlement.proposal_id
    values = {**closing, "proposal_id": proposal_id, "child_id": candidate_id}
    row = connection.execute(statements.CLOSE_PROPOSAL, values).one_or_none()
    if row is None:
        raise KeyError(f"no proposal with id {proposal_id}")
    insert_calls(
        connection,
        row.run_name,
        row.operator,
        settlement.calls,
        proposal_id=proposal_id,
        child_id=candidate_id,
    )
    calls, cost_usd, whole = _total(connection, proposal_id, settlement.calls)
    if calls and not whole and candidate_id is not None:
        linking = {"of_proposal": proposal_id, "child_id": candidate_id}
        connection.execute(statements.LINK_CALLS, linking)
    if row.arm is not None:
        charge_arm(connection, row.run_name, row.arm, pulls=1, cost_usd=cost_usd)


def _total(
    connection: Connection, proposal_id: int, known: Sequence[LLMCallRecordable] = ()
) -> tuple[int, float, bool]:
    """The proposal's calls, cost, tokens and models, from the calls stored under it; its
    (calls, cost), and whether `known` (calls the caller has just stored under it) are all
    of them. They usually are: then the models come from them, and the totals take one
    statement instead of three."""
    of_proposal = {"proposal_id": proposal_id}
    ids = {call.call_id for call in known}
    if known and None not in ids and len(ids) == len(known):
        models = sorted({f"{call.provider}:{call.model}" for call in known})
        values = {**of_proposal, "model_names": models}
        calls, cost_usd = connection.execute(statements.TOTAL_PROPOSAL_WITH_MODELS, values).one()
        whole = calls == len(known)
    else:
        calls, cost_usd = connection.execute(statements.TOTAL_PROPOSAL, of_proposal).one()
        whole = False
    if calls and not whole:
        models = sorted(connection.scalars(statements.PROPOSAL_MODELS, of_proposal))
        connection.execute(statements.SET_MODELS, {**of_proposal, "model_names": models})
    return int(calls), float(cost_usd), whole
