"""The SQL lineage store: SQLite by default, PostgreSQL by URL, schema owned by Alembic."""

from evolve.store.database import StoreNotReadable
from evolve.store.engines import default_url
from evolve.store.proposals import Opening, Settlement
from evolve.store.records import (
    CandidateRecord,
    EvaluationRecord,
    LLMCallRecord,
    ProposalRecord,
    RunRecord,
)
from evolve.store.store import Store

__all__ = [
    "CandidateRecord",
    "EvaluationRecord",
    "LLMCallRecord",
    "Opening",
    "ProposalRecord",
    "RunRecord",
    "Settlement",
    "Store",
    "StoreNotReadable",
    "default_url",
]
