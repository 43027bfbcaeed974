"""Candidates and their lineage: adding one (deduplicated by code), and every way of reading
them back. Reads that the engine makes per candidate go through an index and never load a
whole run."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import Select, func, select

from evolve.plugin.program import Program
from evolve.store import statements
from evolve.store.candidate_ids import CandidateIds
from evolve.store.cursor_statements import execute_one
from evolve.store.database import Database
from evolve.store.deferred import defer, deferring
from evolve.store.proposals import Settlement, settle
from evolve.store.records import CandidateOutline, CandidateRecord
from evolve.store.schema import PENDING, Candidate, LLMCall


class Candidates(Database):
    """The store's candidates: each program a run tried, with its parents and its score."""

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        super().__init__(url, read_only=read_only)
        postgres = self._engine.dialect.name == "postgresql"
        self._ids = CandidateIds() if postgres else None

    def add_candidate(
        self,
        run_name: str,
        program: Program,
        *,
        parent_ids: Sequence[int],
        island: int,
        generation: int,
        mutation: Mapping[str, Any],
        settlement: Settlement | None = None,
        known_new: bool = False,
    ) -> CandidateRecord | None:
        """None, with nothing written, if this run already holds the same code: a program is
        evaluated once. The unique constraint decides, so two racing writers cannot both win,
        and the loser's INSERT does nothing rather than fail (which would roll back the
        caller's turn). The proposal that made the candidate is settled in the same
        transaction, its calls linked to the child and its bandit arm charged.

        `known_new`: the caller knows that the run lacks the program (the engine's
        admission checks every program against all the run holds). Inside a turn on
        PostgreSQL the row then waits for the turn's end, with an id taken ahead
        (evolve/store/candidate_ids.py), and a duplicate all the same (another writer's)
        fails the turn instead of returning None."""
        values = {
            "run_name": run_name,
            "parent_ids": list(parent_ids),
            "island": island,
            "generation": generation,
            "files": dict(program.files),
            "code_hash": program.code_hash,
            "mutation": dict(mutation),
            "status": PENDING,
            "score": None,
            "measurements": 0,
            "created_at": time.time(),
        }
        with self._writing() as connection:
            if known_new and self._ids is not None and deferring(connection):
                new_id = values["id"] = self._ids.next(connection)
                defer(connection, statements.ADD_NUMBERED_CANDIDATE, values, referred=True)
            else:
                # The children waiting in the turn first, for ON CONFLICT to see them, and
                # a new block of ids after: the database numbers this one past the block's.
                self._flush(connection, everything=False)
                if self._ids is not None:
                    self._ids.forget()
                adding = statements.add_candidate(connection.dialect.name)
                # On the cursor: one per candidate (evolve/store/cursor_statements.py).
                added = execute_one(connection, adding, values)
                if added is None:
                    return None
                new_id = added[0]
            if settlement is not None:
                settle(connection, settlement, candidate_id=new_id)
        return CandidateRecord(
            id=new_id,
            run_name=run_name,
            parent_ids=tuple(parent_ids),
            island=island,
            generation=generation,
            program=program,
            code_hash=program.code_hash,
            mutation=values["mutation"],
            status=PENDING,
            score=None,
            measurements=0,
            created_at=values["created_at"],
        )

    def candidate(self, candidate_id: int, *, flush: bool = True) -> CandidateRecord | None:
        """Not `flush`: read what is written so far, without first writing the open turn's
        deferred writes (evolve/store/deferred.py), for a caller that knows none of them
        touches this candidate: they stay one batch, written at the turn's end."""
        with self._reading(flush) as connection:
            row = connection.execute(statements.CANDIDATE, {"id": candidate_id}).one_or_none()
            return None if row is None else CandidateRecord.of(row)

    def lineage(self, candidate_id: int) -> list[CandidateRecord]:
        """The candidate, its first parent, that one's first parent, ... back to the seed."""
        chain: list[CandidateRecord] = []
        with self._read() as session:
            row = session.get(Candidate, candidate_id)
            while row is not None:
                chain.append(CandidateRecord.of(row))
                row = session.get(Candidate, row.parent_ids[0]) if row.parent_ids else None
        return chain

    def seed_candidate(self, run_name: str) -> CandidateRecord | None:
        """The run's first candidate, the root of every lineage in it."""
        return next(
            iter(
                self._candidates(
                    select(Candidate)
                    .where(Candidate.run_name == run_name)
                    .order_by(Candidate.id)
                    .limit(1)
                )
            ),
            None,
        )

    def plant_seed(self, run_name: str, program: Program) -> CandidateRecord:
        """The run's seed, stored as its first candidate when the run has none yet (it is
        then pending, and evaluated like any other)."""
        if (seed := self.seed_candidate(run_name)) is not None:
            return seed
        self.add_candidate(
            run_name, program, parent_ids=[], island=0, generation=0, mutation={"operator": "seed"}
        )
        seed = self.seed_candidate(run_name)
        if seed is None:
            raise RuntimeError(f"run {run_name}: the seed was stored but cannot be read back")
        return seed

    def pending_candidates(self, run_name: str) -> list[CandidateRecord]:
        """Added but never evaluated: the work a killed driver left in flight."""
        return self._candidates(
            select(Candidate)
            .where(Candidate.run_name == run_name, Candidate.status == PENDING)
            .order_by(Candidate.id)
        )

    def scored(self, run_name: str) -> list[tuple[int, int, float]]:
        """(id, island, score) of every scored candidate: all the search needs to resume."""
        query = (
            select(Candidate.id, Candidate.island, Candidate.score)
            .where(Candidate.run_name == run_name, Candidate.score.is_not(None))
            .order_by(Candidate.id)
        )
        with self._read() as session:
            return [(id_, island, score) for id_, island, score in session.execute(query)]

    def first_models(self, run_name: str) -> dict[int, str]:
        """`provider:model` of each candidate's first model call, for the candidates that
        one made. Calls are indexed by run, not by candidate, so they are grouped once for
        the run rather than looked up under each candidate."""
        first_call = (
            select(LLMCall.candidate_id, func.min(LLMCall.id).label("call_id"))
            .where(LLMCall.run_name == run_name, LLMCall.candidate_id.is_not(None))
            .group_by(LLMCall.candidate_id)
            .subquery()
        )
        query = select(first_call.c.candidate_id, LLMCall.provider + ":" + LLMCall.model).join(
            LLMCall, LLMCall.id == first_call.c.call_id
        )
        with self._reading() as connection:
            return {candidate_id: model for candidate_id, model in connection.execute(query)}

    def programs(self, run_name: str) -> list[tuple[int, Program]]:
        """Every candidate's program, oldest first: for the novelty index on resume."""
        query = (
            select(Candidate.id, Candidate.files)
            .where(Candidate.run_name == run_name)
            .order_by(Candidate.id)
        )
        with self._read() as session:
            return [(id_, Program.stored(dict(files))) for id_, files in session.execute(query)]

    def top(
        self, run_name: str, k: int, *, after: CandidateRecord | None = None
    ) -> list[CandidateRecord]:
        """Best first; among equal scores the older candidate wins. `after`: the ranking
        from the candidate after that one (the last of the page before), for reading it
        page by page. Each page starts where the last ended instead of skipping the ranks
        before it with OFFSET, which would rank every candidate above it again for each
        page: resuming a run of many unverified candidates pages through them all."""
        query = select(Candidate).where(
            Candidate.run_name == run_name, Candidate.score.is_not(None)
        )
        if after is not None:
            query = query.where(
                (Candidate.score < after.score)
                | ((Candidate.score == after.score) & (Candidate.id > after.id))
            )
        return self._candidates(query.order_by(Candidate.score.desc(), Candidate.id).limit(k))

    def best(self, run_name: str) -> CandidateRecord | None:
        return next(iter(self.top(run_name, 1)), None)

    def count_candidates(self, run_name: str) -> int:
        query = select(func.count()).where(Candidate.run_name == run_name)
        with self._read() as session:
            return session.scalar(query) or 0

    def status_counts(self, run_name: str) -> dict[str, int]:
        query = (
            select(Candidate.status, func.count())
            .where(Candidate.run_name == run_name)
            .group_by(Candidate.status)
        )
        with self._read() as session:
            return {status: count for status, count in session.execute(query)}

    def each_candidate(self, run_name: str) -> Iterator[CandidateRecord]:
        """Every candidate of the run with its files, oldest first, a page at a time: what an
        export streams out, for a run of any size."""
        table = Candidate.__table__
        query = select(*table.c).where(table.c.run_name == run_name)
        return self._pages(query, table.c.id, CandidateRecord.of)

    def candidate_outlines(self, run_name: str) -> list[CandidateOutline]:
        """Every candidate of the run without its files, oldest first: a run's whole shape
        (lineage, islands, scores) in one query, for views that chart all of it."""
        query = (
            select(
                Candidate.id,
                Candidate.parent_ids,
                Candidate.island,
                Candidate.generation,
                Candidate.mutation,
                Candidate.status,
                Candidate.score,
                Candidate.measurements,
                Candidate.created_at,
            )
            .where(Candidate.run_name == run_name)
            .order_by(Candidate.id)
        )
        with self._reading() as connection:
            return [CandidateOutline.of(row) for row in connection.execute(query)]

    def candidates_by_id(
        self, candidate_ids: Sequence[int], *, flush: bool = True
    ) -> dict[int, CandidateRecord]:
        """The named candidates with their programs, in one query: a lineage's code without
        the rest of its run's. `flush` as for `candidate`."""
        if not candidate_ids:
            return {}
        table = Candidate.__table__
        query = select(*table.c).where(table.c.id.in_(candidate_ids))
        with self._reading(flush) as connection:
            return {row.id: CandidateRecord.of(row) for row in connection.execute(query)}

    def _candidates(self, query: Select[Any]) -> list[CandidateRecord]:
        """Core rows, not the ORM's objects: reading a resumed run's best 4,096 (the
        engine's cache, evolve/engine/candidate_cache.py) took half the time."""
        with self._reading() as connection:
            return [CandidateRecord.of(row) for row in connection.execute(query)]
