"""The LLM ledger: every model call paid for, what a run has spent, and the bandit's arms.

Calls are written one by one as they complete (evolve/store/proposals.py); the helpers
below write inside a caller's transaction, so a proposal's outcome and the arm it pulled,
or the evaluation that rewards an arm, land together or not at all.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

from sqlalchemy import Connection, case, func, select, update

from evolve.llm import LLMCall as LLMCallRecordable
from evolve.store import statements
from evolve.store.database import Database
from evolve.store.records import LLMCallRecord, ModelSpend
from evolve.store.schema import BanditArm, LLMCall


class Ledger(Database):
    """The store's model calls and bandit arms."""

    def bandit_arms(self, run_name: str) -> dict[str, tuple[int, float, float]]:
        """Each arm's (pulls, total reward, total USD): the adaptive model choice's state."""
        query = select(BanditArm).where(BanditArm.run_name == run_name)
        with self._read() as session:
            return {r.arm: (r.pulls, r.reward, r.cost_usd) for r in session.scalars(query)}

    def llm_spend(self, run_name: str) -> tuple[float, int]:
        """USD and tokens charged so far in the run, reservations of requests in flight or
        lost included: what the budgets compare (evolve/llm/reservations.py)."""
        query = select(
            func.coalesce(func.sum(LLMCall.charged_usd), 0.0),
            func.coalesce(func.sum(LLMCall.charged_tokens), 0),
        ).where(LLMCall.run_name == run_name)
        with self._read() as session:
            usd, tokens = session.execute(query).one()
        return float(usd), int(tokens)

    def spend_by_model(self, run_name: str) -> list[ModelSpend]:
        """Each model's calls, failures, tokens and USD in the run, summed by the database
        in one GROUP BY, so that a run's spend is read without loading its prompts. The USD
        is what the budget was charged: a timed-out or lost request at its worst case."""
        query = (
            select(
                LLMCall.provider,
                LLMCall.model,
                func.count(),
                func.coalesce(func.sum(case((LLMCall.status != "ok", 1), else_=0)), 0),
                func.coalesce(func.sum(LLMCall.input_tokens), 0),
                func.coalesce(func.sum(LLMCall.output_tokens), 0),
                func.coalesce(func.sum(LLMCall.charged_usd), 0.0),
            )
            .where(LLMCall.run_name == run_name)
            .group_by(LLMCall.provider, LLMCall.model)
            .order_by(LLMCall.provider, LLMCall.model)
        )
        with self._reading() as connection:
            return [
                ModelSpend(provider, model, calls, int(failed), int(ins), int(outs), float(usd))
                for provider, model, calls, failed, ins, outs, usd in connection.execute(query)
            ]

    def llm_calls(self, candidate_id: int) -> list[LLMCallRecord]:
        """The model calls that made a candidate, oldest first: its prompts and responses."""
        query = select(LLMCall).where(LLMCall.candidate_id == candidate_id).order_by(LLMCall.id)
        with self._read() as session:
            return [LLMCallRecord.of(row) for row in session.scalars(query)]

    def llm_calls_of_run(self, run_name: str) -> list[LLMCallRecord]:
        """The run's whole ledger, oldest first."""
        query = select(LLMCall).where(LLMCall.run_name == run_name).order_by(LLMCall.id)
        with self._read() as session:
            return [LLMCallRecord.of(row) for row in session.scalars(query)]

    def each_llm_call(self, run_name: str) -> Iterator[LLMCallRecord]:
        """The run's whole ledger, prompts and responses included, oldest first, a page at
        a time: for exports of runs too big to hold at once."""
        table = LLMCall.__table__
        query = select(*table.c).where(table.c.run_name == run_name)
        return self._pages(query, table.c.id, LLMCallRecord.of)


def lose_calls_in_flight(connection: Connection, run_name: str) -> int:
    """The run's requests still in flight when its driver stopped or was killed become
    "lost", keeping their reservation as their charge (the provider bills them); how many."""
    losing = (
        update(LLMCall)
        .where(LLMCall.run_name == run_name, LLMCall.status == "in_flight")
        .values(status="lost", error="in flight when the run stopped; charged its worst case")
    )
    return connection.execute(losing).rowcount


def charge_arm(
    connection: Connection,
    run_name: str,
    arm: str,
    *,
    pulls: int = 0,
    reward: float = 0.0,
    cost_usd: float = 0.0,
) -> None:
    """Adds to the arm's pulls, reward and cost in one upsert (see evolve/store/statements.py)."""
    values = {"run_name": run_name, "arm": arm, "pulls": pulls, "reward": reward}
    connection.execute(
        statements.charge_arm(connection.dialect.name), {**values, "cost_usd": cost_usd}
    )


def insert_calls(
    connection: Connection,
    run_name: str,
    operator: str,
    calls: Sequence[LLMCallRecordable],
    *,
    proposal_id: int,
    child_id: int | None = None,
) -> int:
    """The calls not stored yet, or stored in flight and now completed, under their
    proposal, and with `child_id` each linked to the proposal's child, stored before or
    not; how many rows were written (exact for one call, which is one statement, not a
    batch)."""
    if not calls:
        return 0
    rows = [
        {
            "run_name": run_name,
            "candidate_id": child_id,
            "proposal_id": proposal_id,
            "call_id": call.call_id,
            "provider": call.provider,
            "model": call.model,
            "operator": operator,
            "prompt": call.prompt,
            "response": call.response,
            "input_tokens": call.input_tokens,
            "output_tokens": call.output_tokens,
            "cached_tokens": call.cached_tokens,
            "cache_write_tokens": call.cache_write_tokens,
            "cost_usd": call.cost_usd,
            "charged_tokens": call.charged_tokens,
            "charged_usd": call.charged_usd,
            "latency_s": call.latency_s,
            "status": call.status,
            "error": call.error,
            "created_at": call.started_at or time.time(),
        }
        for call in calls
    ]
    dialect = connection.dialect.name
    adding = (
        statements.add_calls(dialect) if child_id is None else statements.add_linked_calls(dialect)
    )
    return connection.execute(adding, rows).rowcount
