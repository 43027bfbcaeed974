"""The SQL lineage store: SQLite by default, PostgreSQL by URL, schema owned by Alembic."""

from evolve.store.database import default_url
from evolve.store.records import CandidateRecord, EvaluationRecord, LLMCallRecord, RunRecord
from evolve.store.store import Store

__all__ = [
    "CandidateRecord",
    "EvaluationRecord",
    "LLMCallRecord",
    "RunRecord",
    "Store",
    "default_url",
]
