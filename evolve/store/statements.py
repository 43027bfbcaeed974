"""The store's per-candidate writes, as statements built once with bound parameters.

The engine writes a few rows for every proposal and evaluation, thousands a minute on a
fast evaluator. Building a statement costs SQLAlchemy more CPU than SQLite takes to run
it, so the hot ones are built here once (per dialect where ON CONFLICT is involved) and
executed with a dict of values; SQLAlchemy then also reuses their compiled form.
"""

from __future__ import annotations

from functools import cache

from sqlalchemy import Insert, Update, bindparam, case, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from evolve.plugin.results import OK
from evolve.store.schema import PENDING, BanditArm, Candidate, Evaluation, LLMCall, Proposal

CANDIDATES, EVALUATIONS = Candidate.__table__, Evaluation.__table__
PROPOSALS, CALLS, ARMS = Proposal.__table__, LLMCall.__table__, BanditArm.__table__


def _dialect_insert(dialect: str, table: object) -> sqlite.Insert | postgresql.Insert:
    """An INSERT that can say ON CONFLICT, which both backends speak but SQLAlchemy spells
    per dialect: a duplicate or an upsert is then one statement and never an error, which
    would roll back the caller's whole transaction."""
    module = postgresql if dialect == "postgresql" else sqlite
    return module.insert(table)  # type: ignore[arg-type]


@cache
def add_candidate(dialect: str) -> Insert:
    """Nothing happens if the run holds the code already; the new id otherwise."""
    adding = _dialect_insert(dialect, CANDIDATES)
    adding = adding.on_conflict_do_nothing(index_elements=["run_name", "code_hash"])
    return adding.returning(CANDIDATES.c.id)


# What a call's reply brings to the row written "in_flight" before it was sent.
_REPLY_COLUMNS = (
    "prompt",
    "response",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "cost_usd",
    "charged_tokens",
    "charged_usd",
    "latency_s",
    "status",
    "error",
)


@cache
def add_calls(dialect: str) -> Insert:
    """A call stored already (same call_id) is skipped by the database, not by a read
    beforehand that could race with it, unless it is stored as still in flight: its reply
    then completes the row. A row that changed counts as written."""
    adding = _dialect_insert(dialect, CALLS)
    return adding.on_conflict_do_update(
        index_elements=["call_id"],
        set_={column: adding.excluded[column] for column in _REPLY_COLUMNS},
        where=CALLS.c.status == "in_flight",
    )


@cache
def add_linked_calls(dialect: str) -> Insert:
    """The same for a proposal that made a child: a call stored first is linked to it, and
    completed by its reply."""
    adding = _dialect_insert(dialect, CALLS)
    columns = (*_REPLY_COLUMNS, "candidate_id")
    return adding.on_conflict_do_update(
        index_elements=["call_id"], set_={column: adding.excluded[column] for column in columns}
    )


@cache
def charge_arm(dialect: str) -> Insert:
    """Adds to an arm's pulls, reward and cost, creating its row the first time the run
    pulls it; the upsert holds the row's lock for the rest of the transaction."""
    adding = _dialect_insert(dialect, ARMS)
    return adding.on_conflict_do_update(
        index_elements=["run_name", "arm"],
        set_={
            "pulls": ARMS.c.pulls + adding.excluded.pulls,
            "reward": ARMS.c.reward + adding.excluded.reward,
            "cost_usd": ARMS.c.cost_usd + adding.excluded.cost_usd,
        },
    )


CANDIDATE = select(*CANDIDATES.c).where(CANDIDATES.c.id == bindparam("id"))
# A candidate whose id was taken ahead (evolve/store/candidate_ids.py), deferred: no ON
# CONFLICT, so a program another writer added meanwhile fails the turn instead of leaving
# the turn's later rows naming a candidate that was never written.
ADD_NUMBERED_CANDIDATE = insert(CANDIDATES).inline()

# Deferred inserts (evolve/store/deferred.py) are `inline`: no implicit RETURNING of the new
# id, which nobody needs, and which psycopg's pipeline could not answer before its end.
ADD_EVALUATION = insert(EVALUATIONS).inline()


def _standing_after() -> Update:
    """The candidate after one more evaluation, worked out from its stored row and the new
    evaluation alone (`new_status`, `new_score`: bound names may not be SET's columns), so
    that the write can wait for the turn's end (evolve/store/deferred.py) and still be
    right whatever the caller believed the row was.
    The rule, as `standing_after` in evolve/store/evaluations.py has it: a pending
    candidate that passes becomes ok, one that failed before stays failed, a failure
    gives the candidate its status; `measurements` counts the ok evaluations, and the
    score is their lowest while the candidate is ok. SET's expressions read the row as
    it was before the UPDATE."""
    passed = bindparam("new_status", type_=CANDIDATES.c.status.type) == OK
    new = bindparam("new_score", type_=CANDIDATES.c.score.type)
    lowest = case(
        (CANDIDATES.c.score.is_(None) | (new < CANDIDATES.c.score), new),
        else_=CANDIDATES.c.score,
    )
    # Not IN (...): its expanding parameter cannot go in an executemany.
    still_ok = passed & ((CANDIDATES.c.status == PENDING) | (CANDIDATES.c.status == OK))
    return (
        update(CANDIDATES)
        .where(CANDIDATES.c.id == bindparam("candidate_id"))
        .values(
            status=case(
                (still_ok, OK),
                (passed, CANDIDATES.c.status),
                else_=bindparam("new_status", type_=CANDIDATES.c.status.type),
            ),
            measurements=CANDIDATES.c.measurements + case((passed, 1), else_=0),
            score=case((still_ok, lowest)),
        )
    )


STANDING_AFTER = _standing_after()

OPEN_PROPOSAL = insert(PROPOSALS).returning(PROPOSALS.c.id)
ADD_PROPOSAL = insert(PROPOSALS).inline()  # a settled one, deferred
CLOSE_PROPOSAL = (
    update(PROPOSALS)
    .where(PROPOSALS.c.id == bindparam("proposal_id"))
    .values(
        outcome=bindparam("outcome"),
        candidate_id=bindparam("child_id"),  # bound names may not be the SET's columns
        finished_at=bindparam("finished_at"),
        detail=bindparam("detail"),
        summary=bindparam("summary"),
        nearest_id=bindparam("nearest_id"),
        similarity=bindparam("similarity"),
    )
    .returning(PROPOSALS.c.run_name, PROPOSALS.c.operator, PROPOSALS.c.arm)
)
_OF_PROPOSAL = CALLS.c.proposal_id == bindparam("proposal_id")
_TOTALS = {
    "calls": select(func.count()).where(_OF_PROPOSAL).scalar_subquery(),
    "cost_usd": select(func.coalesce(func.sum(CALLS.c.cost_usd), 0.0))
    .where(_OF_PROPOSAL)
    .scalar_subquery(),
    "tokens": select(func.coalesce(func.sum(CALLS.c.input_tokens + CALLS.c.output_tokens), 0))
    .where(_OF_PROPOSAL)
    .scalar_subquery(),
}
# A statement of its own, after the proposal's row is locked, so that it sees a call the
# ledger writer committed while this transaction waited for the lock.
TOTAL_PROPOSAL = (
    update(PROPOSALS)
    .where(PROPOSALS.c.id == bindparam("proposal_id"))
    .values(**_TOTALS)
    .returning(PROPOSALS.c.calls, PROPOSALS.c.cost_usd)
)
# The same, with the models the settling driver read from the calls it was handed: right
# whenever those are all the calls stored, which the count it returns tells.
TOTAL_PROPOSAL_WITH_MODELS = (
    update(PROPOSALS)
    .where(PROPOSALS.c.id == bindparam("proposal_id"))
    .values(**_TOTALS, models=bindparam("model_names", type_=PROPOSALS.c.models.type))
    .returning(PROPOSALS.c.calls, PROPOSALS.c.cost_usd)
)
PROPOSAL_MODELS = select(CALLS.c.provider + ":" + CALLS.c.model).where(_OF_PROPOSAL).distinct()
SET_MODELS = (
    update(PROPOSALS)
    .where(PROPOSALS.c.id == bindparam("proposal_id"))
    .values(models=bindparam("model_names", type_=PROPOSALS.c.models.type))
)
LINK_CALLS = (  # bound names may not be the table's columns in an UPDATE
    update(CALLS)
    .where(CALLS.c.proposal_id == bindparam("of_proposal"))
    .values(candidate_id=bindparam("child_id"))
)
# The ledger writer locks a proposal's row before it adds a call, as `settle` does by
# closing it, so that the two never interleave.
LOCK_PROPOSAL = (
    select(PROPOSALS.c.run_name, PROPOSALS.c.operator, PROPOSALS.c.arm, PROPOSALS.c.outcome)
    .where(PROPOSALS.c.id == bindparam("proposal_id"))
    .with_for_update()
)

# A parent's latest settled proposals with their children as they stand: every model
# proposal's prompt shows them.
RECENT_ATTEMPTS = (
    select(*PROPOSALS.c, CANDIDATES.c.status, CANDIDATES.c.score)
    .outerjoin(CANDIDATES, CANDIDATES.c.id == PROPOSALS.c.candidate_id)
    .where(PROPOSALS.c.parent_id == bindparam("parent_id"), PROPOSALS.c.outcome.is_not(None))
    .order_by(PROPOSALS.c.id.desc())
    .limit(bindparam("limit"))
)
