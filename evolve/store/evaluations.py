"""Evaluations: recording a measurement of a candidate, which decides its status and score."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, replace

from sqlalchemy import case, func, select

from evolve.plugin.results import OK, EvalResult
from evolve.store import statements
from evolve.store.database import Database
from evolve.store.deferred import defer
from evolve.store.ledger import charge_arm
from evolve.store.records import (
    CandidateRecord,
    EvaluationOutline,
    EvaluationRecord,
    FailedEvaluation,
)
from evolve.store.schema import EVALUATION_KINDS, PENDING, Candidate, Evaluation


def scoring_evaluation(evaluations: Sequence[EvaluationRecord]) -> EvaluationRecord | None:
    """The evaluation whose score is the candidate's: the lowest of its ok ones (the latest
    of equals). Its metrics are the ones to show beside the score, so that the score and
    the numbers next to it always come from the same measurement."""
    passed = [e for e in evaluations if e.status == OK and e.score is not None]
    if not passed:
        return None
    return min(reversed(passed), key=lambda e: e.score)  # type: ignore[arg-type, return-value]


def standing_after(candidate: CandidateRecord, status: str, score: float | None) -> CandidateRecord:
    """The candidate after one more evaluation: a candidate is "ok" only while every
    evaluation of it is; one failure (a flaky re-measure included) gives it that failure's
    status and takes its score away for good. Its score is the minimum over its ok
    evaluations, so a lucky measurement cannot crown it. The store's own statement
    (STANDING_AFTER in evolve/store/statements.py) applies the same rule to the row."""
    if status != OK:
        return replace(candidate, status=status, score=None)
    if candidate.status not in (PENDING, OK):
        return replace(candidate, measurements=candidate.measurements + 1, score=None)
    lowest = candidate.score
    if lowest is None or (score is not None and score < lowest):
        lowest = score
    return replace(candidate, status=OK, measurements=candidate.measurements + 1, score=lowest)


class Evaluations(Database):
    """The store's evaluations: every measurement of every candidate, kept."""

    def record_evaluation(
        self,
        candidate: CandidateRecord,
        result: EvalResult,
        *,
        kind: str,
        score: float | None,
        input_seed: int,
        worker: str,
        started_at: float,
        finished_at: float,
        reward: tuple[str, float] | None = None,
    ) -> CandidateRecord:
        """Stores the evaluation and the candidate's new standing in one transaction, and
        returns `candidate` as it now stands (`standing_after`): pass the record this
        returned last time, as the engine (the candidate's only writer) does. The store
        itself works the standing out from its own row, so an older record gives a wrong
        answer here and never a wrong row. Inside a turn both writes wait for its end
        (evolve/store/deferred.py). `reward` is credited to a bandit arm in the same
        transaction, so a crash cannot count it twice or never. A candidate that is not
        in the store fails the write (its foreign key), at the end of the turn."""
        if kind not in EVALUATION_KINDS:
            raise ValueError(f"evaluation kind must be one of {EVALUATION_KINDS}, not {kind!r}")
        values = {
            "candidate_id": candidate.id,
            "run_name": candidate.run_name,
            "kind": kind,
            "status": result.status,
            "stages": [asdict(stage) for stage in result.stages],
            "metrics": dict(result.metrics),
            "counters": {name: asdict(reading) for name, reading in result.counters.items()},
            "feedback": result.feedback,
            "artifacts": dict(result.artifacts),
            "sandbox": dict(result.sandbox),
            "score": score,
            "input_seed": input_seed,
            "worker": worker,
            "started_at": started_at,
            "finished_at": finished_at,
        }
        standing = {"candidate_id": candidate.id, "new_status": result.status, "new_score": score}
        with self._writing() as connection:
            defer(connection, statements.ADD_EVALUATION, values)
            defer(connection, statements.STANDING_AFTER, standing)
            if reward is not None:
                charge_arm(connection, candidate.run_name, reward[0], reward=reward[1])
        return standing_after(candidate, result.status, score)

    def evaluations(self, candidate_id: int) -> list[EvaluationRecord]:
        """Oldest first."""
        query = (
            select(Evaluation)
            .where(Evaluation.candidate_id == candidate_id)
            .order_by(Evaluation.id)
        )
        with self._read() as session:
            return [EvaluationRecord.of(row) for row in session.scalars(query)]

    def scoring_metrics(self, run_name: str) -> dict[int, dict[str, float]]:
        """Each scored candidate's metrics, from the evaluation that gave its score: what the
        search places it by (MAP-Elites features, Pareto objectives) on resume."""
        query = (
            select(Evaluation.candidate_id, Evaluation.metrics)
            .join(Candidate, Candidate.id == Evaluation.candidate_id)
            .where(
                Candidate.run_name == run_name,
                Candidate.score.is_not(None),
                Evaluation.status == OK,
                Evaluation.score == Candidate.score,
            )
            .order_by(Evaluation.id)
        )
        with self._read() as session:
            return {candidate_id: metrics for candidate_id, metrics in session.execute(query)}

    def each_evaluation(self, run_name: str) -> Iterator[EvaluationRecord]:
        """Every evaluation of a run, oldest first, a page at a time: for exports of runs
        too big to hold at once."""
        table = Evaluation.__table__
        query = select(*table.c).where(table.c.run_name == run_name)
        return self._pages(query, table.c.id, EvaluationRecord.of)

    def evaluation_outlines(self, run_name: str) -> list[EvaluationOutline]:
        """Every evaluation of a run without its texts, oldest first, in one query: when
        each ended, with what, and on which machine."""
        query = (
            select(
                Evaluation.id,
                Evaluation.candidate_id,
                Evaluation.kind,
                Evaluation.status,
                Evaluation.score,
                Evaluation.started_at,
                Evaluation.finished_at,
                Evaluation.sandbox,
            )
            .where(Evaluation.run_name == run_name)
            .order_by(Evaluation.id)
        )
        with self._reading() as connection:
            return [EvaluationOutline.of(row) for row in connection.execute(query)]

    def failed_evaluations(self, run_name: str, feedback_chars: int) -> list[FailedEvaluation]:
        """The run's evaluations that did not pass, oldest first, with their stages and the
        first and the last `feedback_chars` of their feedback (a crash's traceback ends with
        what went wrong): why candidates failed, without reading whole texts."""
        text, length = Evaluation.feedback, func.length(Evaluation.feedback)
        tail = case(  # SQLite and PostgreSQL read a negative start differently
            (length > feedback_chars, func.substr(text, length - feedback_chars + 1)),
            else_=text,
        )
        query = (
            select(
                Evaluation.id,
                Evaluation.candidate_id,
                Evaluation.kind,
                Evaluation.status,
                Evaluation.stages,
                func.substr(Evaluation.feedback, 1, feedback_chars).label("feedback"),
                tail.label("feedback_tail"),
            )
            .where(Evaluation.run_name == run_name, Evaluation.status != OK)
            .order_by(Evaluation.id)
        )
        with self._reading() as connection:
            return [FailedEvaluation.of(row) for row in connection.execute(query)]

    def run_evaluations(self, run_name: str) -> list[EvaluationRecord]:
        """Every evaluation of a run, oldest first: for audits and exports."""
        query = select(Evaluation).where(Evaluation.run_name == run_name).order_by(Evaluation.id)
        with self._read() as session:
            return [EvaluationRecord.of(row) for row in session.scalars(query)]
