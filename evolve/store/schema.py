"""The tables of the lineage store.

This module is the schema's source of truth for queries and for Alembic's autogenerate. A
new, empty database gets its tables from here in one go, stamped as the newest migration
(evolve/store/new_schema.py); one that exists is brought to head by the migrations, and
tests/test_store.py holds the two to the same schema. Times are floats of unix seconds,
which every backend stores alike. Constraint names are fixed by a naming convention so
migrations can refer to them by name.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Double,
    ForeignKey,
    Index,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

PENDING = "pending"
RUN_STATUSES = ("running", "finished", "stopped", "failed", "killed")
EVALUATION_KINDS = ("evaluate", "remeasure")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Run(Base):
    """One `evolve run`; it keeps the task text so a resume does not depend on the file."""

    __tablename__ = "runs"

    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    created_at: Mapped[float] = mapped_column(Double)
    task_path: Mapped[str] = mapped_column(Text)
    task_yaml: Mapped[str] = mapped_column(Text)
    seed: Mapped[int] = mapped_column(BigInteger)
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(32))
    wall_s_used: Mapped[float] = mapped_column(Double, default=0.0)
    updated_at: Mapped[float] = mapped_column(Double)
    # The process driving it while `running` ({host, pid, started}), so that a later command
    # on that host can tell a run whose driver was killed from one still going.
    driver: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class Candidate(Base):
    """A program with its place in the search; (run, code_hash) is unique, which is the dedupe."""

    __tablename__ = "candidates"
    __table_args__ = (
        UniqueConstraint("run_name", "code_hash"),
        Index(None, "run_name", "status"),
        Index(None, "run_name", "score"),
    )

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    run_name: Mapped[str] = mapped_column(ForeignKey("runs.name"))
    parent_ids: Mapped[list[int]] = mapped_column(JSON)
    island: Mapped[int]
    generation: Mapped[int]
    files: Mapped[dict[str, str]] = mapped_column(JSON)
    code_hash: Mapped[str] = mapped_column(String(64))
    mutation: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(64), default=PENDING)
    score: Mapped[float | None] = mapped_column(Double)
    measurements: Mapped[int] = mapped_column(default=0)
    created_at: Mapped[float] = mapped_column(Double)


class Evaluation(Base):
    """One evaluator run of one candidate; a candidate's status and score derive from these."""

    __tablename__ = "evaluations"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidates.id"), index=True)
    run_name: Mapped[str] = mapped_column(ForeignKey("runs.name"))
    kind: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(64))
    stages: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    metrics: Mapped[dict[str, float]] = mapped_column(JSON)
    counters: Mapped[dict[str, dict[str, Any]]] = mapped_column(JSON)
    feedback: Mapped[str] = mapped_column(Text)
    artifacts: Mapped[dict[str, str]] = mapped_column(JSON)
    sandbox: Mapped[dict[str, Any]] = mapped_column(JSON)
    score: Mapped[float | None] = mapped_column(Double)
    input_seed: Mapped[int] = mapped_column(BigInteger)
    worker: Mapped[str] = mapped_column(String(255))
    started_at: Mapped[float] = mapped_column(Double)
    finished_at: Mapped[float] = mapped_column(Double)


class Proposal(Base):
    """One request to an operator for a child, whatever became of it: the ledger that groups
    a proposal's model calls and says why a paid proposal made no candidate. `outcome` is
    None while it is in flight (evolve/plugin/proposal_outcomes.py has the words)."""

    __tablename__ = "proposals"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    run_name: Mapped[str] = mapped_column(ForeignKey("runs.name"), index=True)
    operator: Mapped[str] = mapped_column(String(64))
    models: Mapped[list[str]] = mapped_column(JSON)
    parent_ids: Mapped[list[int]] = mapped_column(JSON)
    # The first parent, apart, so that a parent's recent attempts are one indexed query.
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("candidates.id"), index=True)
    island: Mapped[int]
    arm: Mapped[str | None] = mapped_column(String(255))  # the bandit's choice, if it chose
    outcome: Mapped[str | None] = mapped_column(String(64))
    detail: Mapped[str] = mapped_column(Text, default="")
    summary: Mapped[str] = mapped_column(Text, default="")  # one line: what the change was
    candidate_id: Mapped[int | None] = mapped_column(ForeignKey("candidates.id"))
    nearest_id: Mapped[int | None]  # too_similar: the program it was too close to
    similarity: Mapped[float | None] = mapped_column(Double)
    calls: Mapped[int] = mapped_column(default=0)
    cost_usd: Mapped[float] = mapped_column(Double, default=0.0)
    tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[float] = mapped_column(Double)
    finished_at: Mapped[float | None] = mapped_column(Double)


class LLMCall(Base):
    """One model request: the ledger behind the USD and token budgets. It is written before
    the request is sent (status "in_flight", charged its reservation) and again when it
    completes, so a driver killed mid-request loses no paid call; `created_at` is when the
    request was made."""

    __tablename__ = "llm_calls"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    run_name: Mapped[str] = mapped_column(ForeignKey("runs.name"), index=True)
    candidate_id: Mapped[int | None] = mapped_column(ForeignKey("candidates.id"))
    proposal_id: Mapped[int | None] = mapped_column(ForeignKey("proposals.id"), index=True)
    # Unique, so a call the ledger writer stored is never stored again at settlement.
    call_id: Mapped[str | None] = mapped_column(String(32), unique=True)
    provider: Mapped[str] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(255))
    operator: Mapped[str] = mapped_column(String(64))
    prompt: Mapped[str] = mapped_column(Text)
    response: Mapped[str] = mapped_column(Text)
    input_tokens: Mapped[int]  # all of them, cached ones included
    output_tokens: Mapped[int]
    # server_default as the migration that added them has it (evolve/store/new_schema.py)
    cached_tokens: Mapped[int] = mapped_column(default=0, server_default="0")  # a cache read
    cache_write_tokens: Mapped[int] = mapped_column(default=0, server_default="0")
    cost_usd: Mapped[float] = mapped_column(Double)
    # What the budgets count: the usage, or the worst case reserved before the request was
    # sent where no usage came back (status "in_flight", "timeout", "lost").
    charged_tokens: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    charged_usd: Mapped[float] = mapped_column(Double, default=0.0, server_default="0")
    latency_s: Mapped[float] = mapped_column(Double)
    status: Mapped[str] = mapped_column(String(64))
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Double)


class Migration(Base):
    """A candidate copied to another island by the search (not a schema migration)."""

    __tablename__ = "migrations"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    run_name: Mapped[str] = mapped_column(ForeignKey("runs.name"), index=True)
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidates.id"))
    to_island: Mapped[int]
    created_at: Mapped[float] = mapped_column(Double)


class BanditArm(Base):
    """What the adaptive model choice has learnt about one (operator, model) arm of a run."""

    __tablename__ = "bandit_arms"

    run_name: Mapped[str] = mapped_column(ForeignKey("runs.name"), primary_key=True)
    arm: Mapped[str] = mapped_column(String(255), primary_key=True)
    pulls: Mapped[int]
    reward: Mapped[float] = mapped_column(Double)
    cost_usd: Mapped[float] = mapped_column(Double)
