"""The SQL lineage store: SQLite by default, PostgreSQL by URL, schema owned by Alembic."""

from evolve.store.records import CandidateRecord, EvaluationRecord, LLMCallRecord, RunRecord
from evolve.store.store import Store, default_url

__all__ = [
    "CandidateRecord",
    "EvaluationRecord",
    "LLMCallRecord",
    "RunRecord",
    "Store",
    "default_url",
]
