"""What the store hands back: frozen values with no session behind them.

Callers keep these across threads and after the store is closed, so they must never lazy-load
or notice a later write; converting at the store's edge guarantees that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row

from evolve.plugin.program import Program
from evolve.plugin.results import Counter, StageResult
from evolve.store.schema import Candidate, Evaluation, LLMCall, Migration, Proposal, Run


@dataclass(frozen=True)
class RunRecord:
    name: str
    created_at: float
    task_path: str
    task_yaml: str
    seed: int
    settings: dict[str, Any]
    status: str
    wall_s_used: float
    updated_at: float
    driver: dict[str, Any] | None = None

    @classmethod
    def of(cls, row: Run) -> RunRecord:
        return cls(
            name=row.name,
            created_at=row.created_at,
            task_path=row.task_path,
            task_yaml=row.task_yaml,
            seed=row.seed,
            settings=row.settings,
            status=row.status,
            wall_s_used=row.wall_s_used,
            updated_at=row.updated_at,
            driver=row.driver,
        )


@dataclass(frozen=True)
class CandidateRecord:
    """`score` is None until the candidate has passed every evaluation it has had."""

    id: int
    run_name: str
    parent_ids: tuple[int, ...]
    island: int
    generation: int
    program: Program
    code_hash: str
    mutation: dict[str, Any]
    status: str
    score: float | None
    measurements: int
    created_at: float

    @classmethod
    def of(cls, row: Candidate | Row[Any]) -> CandidateRecord:
        """From the ORM's row or from a Core row of all the table's columns."""
        return cls(
            id=row.id,
            run_name=row.run_name,
            parent_ids=tuple(row.parent_ids),
            island=row.island,
            generation=row.generation,
            program=Program.stored(dict(row.files)),
            code_hash=row.code_hash,
            mutation=mutation_of(row.mutation),
            status=row.status,
            score=row.score,
            measurements=row.measurements,
            created_at=row.created_at,
        )


def mutation_of(stored: object) -> dict[str, Any]:
    """A candidate's mutation record as every view reads it: a dict, even where the store
    holds something else (written by hand, or tampered with)."""
    return stored if isinstance(stored, dict) else {}


@dataclass(frozen=True)
class EvaluationRecord:
    """Stages and counters come back as the same types the evaluator produced."""

    id: int
    candidate_id: int
    run_name: str
    kind: str
    status: str
    stages: tuple[StageResult, ...]
    metrics: dict[str, float]
    counters: dict[str, Counter]
    feedback: str
    artifacts: dict[str, str]
    sandbox: dict[str, Any]
    score: float | None
    input_seed: int
    worker: str
    started_at: float
    finished_at: float

    @classmethod
    def of(cls, row: Evaluation) -> EvaluationRecord:
        return cls(
            id=row.id,
            candidate_id=row.candidate_id,
            run_name=row.run_name,
            kind=row.kind,
            status=row.status,
            stages=tuple(StageResult(**stage) for stage in row.stages),
            metrics=row.metrics,
            counters={name: Counter(**reading) for name, reading in row.counters.items()},
            feedback=row.feedback,
            artifacts=row.artifacts,
            sandbox=row.sandbox,
            score=row.score,
            input_seed=row.input_seed,
            worker=row.worker,
            started_at=row.started_at,
            finished_at=row.finished_at,
        )


@dataclass(frozen=True)
class LLMCallRecord:
    id: int
    run_name: str
    candidate_id: int | None
    proposal_id: int | None
    call_id: str | None
    provider: str
    model: str
    operator: str
    prompt: str
    response: str
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    cost_usd: float
    charged_tokens: int
    charged_usd: float
    latency_s: float
    status: str
    error: str | None
    created_at: float

    @classmethod
    def of(cls, row: LLMCall) -> LLMCallRecord:
        return cls(**{column: getattr(row, column) for column in cls.__dataclass_fields__})


@dataclass(frozen=True)
class ProposalRecord:
    """A proposal and, when it made a candidate, that child's status and score now."""

    id: int
    run_name: str
    operator: str
    models: tuple[str, ...]
    parent_ids: tuple[int, ...]
    island: int
    arm: str | None
    outcome: str | None
    detail: str
    summary: str
    candidate_id: int | None
    nearest_id: int | None
    similarity: float | None
    calls: int
    cost_usd: float
    tokens: int
    created_at: float
    finished_at: float | None
    child_status: str | None = None
    child_score: float | None = None

    @classmethod
    def of(
        cls, row: Proposal | Row[Any], child: Candidate | Row[Any] | None = None
    ) -> ProposalRecord:
        """From ORM rows, or from a Core row of the proposal's columns and the child's
        status and score."""
        return cls(
            id=row.id,
            run_name=row.run_name,
            operator=row.operator,
            models=tuple(row.models),
            parent_ids=tuple(row.parent_ids),
            island=row.island,
            arm=row.arm,
            outcome=row.outcome,
            detail=row.detail,
            summary=row.summary,
            candidate_id=row.candidate_id,
            nearest_id=row.nearest_id,
            similarity=row.similarity,
            calls=row.calls,
            cost_usd=row.cost_usd,
            tokens=row.tokens,
            created_at=row.created_at,
            finished_at=row.finished_at,
            child_status=child.status if child is not None else None,
            child_score=child.score if child is not None else None,
        )


@dataclass(frozen=True)
class MigrationRecord:
    """A candidate copied to another island, with every column, for exports."""

    id: int
    run_name: str
    candidate_id: int
    to_island: int
    created_at: float

    @classmethod
    def of(cls, row: Migration | Row[Any]) -> MigrationRecord:
        return cls(**{column: getattr(row, column) for column in cls.__dataclass_fields__})


@dataclass(frozen=True)
class RunTotals:
    """What a listing of runs shows beside each run, counted by the database: a run with
    neither candidates nor model calls has all the defaults."""

    candidates: int = 0
    calls: int = 0
    cost_usd: float = 0.0
    tokens: int = 0


@dataclass(frozen=True)
class CandidateOutline:
    """A candidate without its program: what a view of a whole run needs of each of its
    thousands of candidates, without reading their code."""

    id: int
    parent_ids: tuple[int, ...]
    island: int
    generation: int
    mutation: dict[str, Any]
    status: str
    score: float | None
    measurements: int
    created_at: float

    @classmethod
    def of(cls, row: Row[Any]) -> CandidateOutline:
        values = {column: getattr(row, column) for column in cls.__dataclass_fields__}
        parents = {"parent_ids": tuple(row.parent_ids), "mutation": mutation_of(row.mutation)}
        return cls(**{**values, **parents})


@dataclass(frozen=True)
class EvaluationOutline:
    """An evaluation without its texts, and where it ran: the worker's `node` (host, CPU
    model, Ray node id) from its sandbox summary, None where the worker did not say."""

    id: int
    candidate_id: int
    kind: str
    status: str
    score: float | None
    started_at: float
    finished_at: float
    node: dict[str, Any] | None

    @classmethod
    def of(cls, row: Row[Any]) -> EvaluationOutline:
        node = (row.sandbox or {}).get("node")
        return cls(
            id=row.id,
            candidate_id=row.candidate_id,
            kind=row.kind,
            status=row.status,
            score=row.score,
            started_at=row.started_at,
            finished_at=row.finished_at,
            node=node if isinstance(node, dict) else None,
        )


@dataclass(frozen=True)
class FailedEvaluation:
    """An evaluation that did not pass, with what says why: its stages and the head of its
    feedback (an evaluator's crash leaves no stage, only a traceback)."""

    id: int
    candidate_id: int
    kind: str
    status: str
    stages: tuple[StageResult, ...]
    feedback: str  # its head
    feedback_tail: str  # and its end, as long

    @classmethod
    def of(cls, row: Row[Any]) -> FailedEvaluation:
        return cls(
            id=row.id,
            candidate_id=row.candidate_id,
            kind=row.kind,
            status=row.status,
            stages=tuple(StageResult(**stage) for stage in row.stages),
            feedback=row.feedback,
            feedback_tail=row.feedback_tail,
        )


@dataclass(frozen=True)
class ModelSpend:
    """One model's calls in a run, summed by the database."""

    provider: str
    model: str
    calls: int
    failed: int  # calls whose status is not ok: paid for, or at least waited for, in vain
    input_tokens: int
    output_tokens: int
    cost_usd: float
