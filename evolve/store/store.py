"""The lineage store: every run, candidate, evaluation and island migration, in SQL.

Each public write is one short transaction, so a driver killed at any instant leaves either
all of a write or none of it, and `evolve run --resume` rebuilds from what is there. Reads
that the engine makes per candidate go through an index and never load a whole run.

SQLite is the default. Its file runs in WAL mode so readers (the leaderboard) never block the
writer, and with synchronous=NORMAL a commit survives a killed process without an fsync each.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn, Self

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, Select, create_engine, event, func, select
from sqlalchemy.engine import URL, make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry

from evolve.program import Program
from evolve.results import OK, EvalResult
from evolve.store.records import CandidateRecord, EvaluationRecord, LLMCallRecord, RunRecord
from evolve.store.schema import (
    EVALUATION_KINDS,
    PENDING,
    RUN_STATUSES,
    BanditArm,
    Candidate,
    Evaluation,
    LLMCall,
    Migration,
    Run,
)

if TYPE_CHECKING:  # the ledger takes evolve.llm's records; importing it here would load the SDKs
    from evolve.llm import LLMCall as LLMCallRecordable

MIGRATIONS = Path(__file__).parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 30_000
# Alembic runs env.py through module-level proxies (alembic.context, alembic.op), so two
# upgrades in one process at once would trample each other's state.
_UPGRADE_LOCK = threading.Lock()


def default_url(results_dir: Path) -> str:
    """The SQLite file a run writes when the user names no database."""
    return URL.create("sqlite", database=str(results_dir / "evolve.db")).render_as_string()


def _parse(url: str) -> URL:
    """Accept the plain `postgresql://` URL users copy from elsewhere; we ship psycopg 3."""
    parsed = make_url(url)
    if parsed.drivername in ("postgres", "postgresql"):
        return parsed.set(drivername="postgresql+psycopg")
    return parsed


def _sqlite_connect(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    # The driver's own transaction handling skips BEGIN before DDL and SELECT; switch it off
    # and let `_sqlite_begin` emit BEGIN, so a migration is atomic and reads are snapshots.
    dbapi_connection.isolation_level = None  # type: ignore[attr-defined]
    cursor = dbapi_connection.cursor()
    # The busy timeout goes first: turning on WAL needs a lock another process may hold.
    for pragma in (
        f"busy_timeout={SQLITE_BUSY_TIMEOUT_MS}",
        "journal_mode=WAL",
        "synchronous=NORMAL",
        "foreign_keys=ON",
    ):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def _sqlite_begin(connection: Connection) -> None:
    # Writers say BEGIN IMMEDIATE: they take the write lock up front (waiting for it under the
    # busy timeout) instead of failing when a read inside the transaction turns into a write.
    connection.exec_driver_sql(connection.get_execution_options().get("sqlite_begin", "BEGIN"))


def _engine(url: URL) -> Engine:
    if url.get_backend_name() != "sqlite":
        return create_engine(url)
    if url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url)
    event.listen(engine, "connect", _sqlite_connect)
    event.listen(engine, "begin", _sqlite_begin)
    return engine


class Store:
    """Opens (and if needed creates or upgrades) the database at `url`; lives in the driver."""

    def __init__(self, url: str) -> None:
        self._url = _parse(url)
        self._engine = _engine(self._url)
        writer = self._engine.execution_options(sqlite_begin="BEGIN IMMEDIATE")
        self._read = sessionmaker(self._engine, expire_on_commit=False)
        self._write = sessionmaker(writer, expire_on_commit=False)
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with _UPGRADE_LOCK, writer.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    def __repr__(self) -> str:
        return f"Store({self.display_url!r})"

    @property
    def display_url(self) -> str:
        """The URL with any password masked, fit for terminals and logs."""
        return self._url.render_as_string(hide_password=True)

    @property
    def url(self) -> str:
        """The full URL, password included: for opening the same store elsewhere, never
        for printing."""
        return self._url.render_as_string(hide_password=False)

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            "a Store belongs to the driver process and cannot be pickled; "
            "send results back to the driver, or pass the URL and open a new Store"
        )

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    # Runs

    def create_run(
        self,
        name: str,
        *,
        task_path: str | Path,
        task_yaml: str,
        seed: int,
        settings: Mapping[str, Any],
    ) -> RunRecord:
        now = time.time()
        row = Run(
            name=name,
            created_at=now,
            task_path=str(task_path),
            task_yaml=task_yaml,
            seed=seed,
            settings=dict(settings),
            status="running",
            wall_s_used=0.0,
            updated_at=now,
        )
        try:
            with self._write() as session, session.begin():
                session.add(row)
        except IntegrityError as error:
            raise ValueError(
                f"a run named {name!r} already exists; pick another name or resume it"
            ) from error
        return RunRecord.of(row)

    def get_run(self, name: str) -> RunRecord | None:
        with self._read() as session:
            row = session.get(Run, name)
            return None if row is None else RunRecord.of(row)

    def latest_run(self) -> RunRecord | None:
        with self._read() as session:
            row = session.scalars(select(Run).order_by(Run.created_at.desc()).limit(1)).first()
            return None if row is None else RunRecord.of(row)

    def list_runs(self) -> list[RunRecord]:
        """Oldest first."""
        with self._read() as session:
            return [
                RunRecord.of(row) for row in session.scalars(select(Run).order_by(Run.created_at))
            ]

    def set_run_status(
        self, name: str, status: str, *, driver: Mapping[str, Any] | None = None
    ) -> None:
        """`driver` names the process that drives a `running` run; other statuses have none."""
        if status not in RUN_STATUSES:
            raise ValueError(f"run status must be one of {RUN_STATUSES}, not {status!r}")
        with self._write() as session, session.begin():
            row = self._locked_run(session, name)
            row.status, row.updated_at = status, time.time()
            row.driver = dict(driver) if driver is not None and status == "running" else None

    def add_wall_time(self, name: str, seconds: float) -> None:
        """Adds rather than sets, so the wall-time budget spans every resume of the run."""
        with self._write() as session, session.begin():
            row = self._locked_run(session, name)
            row.wall_s_used, row.updated_at = row.wall_s_used + seconds, time.time()

    @staticmethod
    def _locked_run(session: Session, name: str) -> Run:
        row = session.get(Run, name, with_for_update=True)
        if row is None:
            raise KeyError(f"no run named {name!r}")
        return row

    # Candidates

    def add_candidate(
        self,
        run_name: str,
        program: Program,
        *,
        parent_ids: Sequence[int],
        island: int,
        generation: int,
        mutation: Mapping[str, Any],
        llm_calls: Sequence[LLMCallRecordable] = (),
        arm: str | None = None,
    ) -> CandidateRecord | None:
        """None, with nothing written, if this run already holds the same code: a program is
        evaluated once. The unique constraint decides, so two racing writers cannot both win.
        The model calls that made the candidate, and the pull of the bandit `arm` that chose
        the model, are written in the same transaction."""
        row = Candidate(
            run_name=run_name,
            parent_ids=list(parent_ids),
            island=island,
            generation=generation,
            files=dict(program.files),
            code_hash=program.code_hash,
            mutation=dict(mutation),
            status=PENDING,
            score=None,
            measurements=0,
            created_at=time.time(),
        )
        operator = str(mutation.get("operator", ""))
        try:
            with self._write() as session, session.begin():
                session.add(row)
                session.flush()
                session.add_all(_call_rows(run_name, row.id, operator, llm_calls))
                _pull(session, run_name, arm, llm_calls)
        except IntegrityError:
            if self.has_code(run_name, row.code_hash):
                return None
            raise
        return CandidateRecord.of(row)

    # The LLM ledger

    def record_llm_calls(
        self,
        run_name: str,
        calls: Sequence[LLMCallRecordable],
        *,
        operator: str,
        candidate_id: int | None = None,
        arm: str | None = None,
    ) -> None:
        """Calls that made no candidate (failed, duplicate, garbage): paid for, so kept, and a
        pull of the bandit `arm` that chose them, with no reward."""
        if calls or arm:
            with self._write() as session, session.begin():
                session.add_all(_call_rows(run_name, candidate_id, operator, calls))
                _pull(session, run_name, arm, calls)

    def bandit_arms(self, run_name: str) -> dict[str, tuple[int, float, float]]:
        """Each arm's (pulls, total reward, total USD): the adaptive model choice's state."""
        query = select(BanditArm).where(BanditArm.run_name == run_name)
        with self._read() as session:
            return {r.arm: (r.pulls, r.reward, r.cost_usd) for r in session.scalars(query)}

    def llm_spend(self, run_name: str) -> tuple[float, int]:
        """USD and tokens (input + output) spent so far in the run: what the budgets compare."""
        query = select(
            func.coalesce(func.sum(LLMCall.cost_usd), 0.0),
            func.coalesce(func.sum(LLMCall.input_tokens + LLMCall.output_tokens), 0),
        ).where(LLMCall.run_name == run_name)
        with self._read() as session:
            usd, tokens = session.execute(query).one()
        return float(usd), int(tokens)

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

    def has_code(self, run_name: str, code_hash: str) -> bool:
        query = select(Candidate.id).where(
            Candidate.run_name == run_name, Candidate.code_hash == code_hash
        )
        with self._read() as session:
            return session.scalars(query.limit(1)).first() is not None

    def candidate(self, candidate_id: int) -> CandidateRecord | None:
        with self._read() as session:
            row = session.get(Candidate, candidate_id)
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

    def top(self, run_name: str, k: int, *, offset: int = 0) -> list[CandidateRecord]:
        """Best first; among equal scores the older candidate wins. `offset` skips that many,
        for reading the ranking page by page."""
        return self._candidates(
            select(Candidate)
            .where(Candidate.run_name == run_name, Candidate.score.is_not(None))
            .order_by(Candidate.score.desc(), Candidate.id)
            .offset(offset)
            .limit(k)
        )

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

    def _candidates(self, query: Select[Any]) -> list[CandidateRecord]:
        with self._read() as session:
            return [CandidateRecord.of(row) for row in session.scalars(query)]

    # Evaluations

    def record_evaluation(
        self,
        candidate_id: int,
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
        """Stores the evaluation and updates its candidate in one transaction; returns the
        candidate as updated, which is what every caller needs next. `reward` is credited
        to a bandit arm in the same transaction, so a crash cannot count it twice or never.

        A candidate is "ok" only while every evaluation of it is; one failure (a flaky
        re-measure included) gives it that failure's status and takes its score away. Its
        score is the minimum over its ok evaluations, so a lucky measurement cannot crown it.
        """
        if kind not in EVALUATION_KINDS:
            raise ValueError(f"evaluation kind must be one of {EVALUATION_KINDS}, not {kind!r}")
        with self._write() as session, session.begin():
            candidate = session.get(Candidate, candidate_id, with_for_update=True)
            if candidate is None:
                raise KeyError(f"no candidate with id {candidate_id}")
            row = Evaluation(
                candidate_id=candidate_id,
                run_name=candidate.run_name,
                kind=kind,
                status=result.status,
                stages=[asdict(stage) for stage in result.stages],
                metrics=dict(result.metrics),
                counters={name: asdict(reading) for name, reading in result.counters.items()},
                feedback=result.feedback,
                artifacts=dict(result.artifacts),
                sandbox=dict(result.sandbox),
                score=score,
                input_seed=input_seed,
                worker=worker,
                started_at=started_at,
                finished_at=finished_at,
            )
            session.add(row)
            session.flush()
            passed, lowest = session.execute(
                select(func.count(), func.min(Evaluation.score)).where(
                    Evaluation.candidate_id == candidate_id, Evaluation.status == OK
                )
            ).one()
            if not result.ok:
                candidate.status = result.status
            elif candidate.status == PENDING:
                candidate.status = OK
            candidate.measurements = passed
            candidate.score = lowest if candidate.status == OK else None
            if reward is not None:
                _arm(session, candidate.run_name, reward[0]).reward += reward[1]
        return CandidateRecord.of(candidate)

    def evaluations(self, candidate_id: int) -> list[EvaluationRecord]:
        """Oldest first."""
        query = (
            select(Evaluation)
            .where(Evaluation.candidate_id == candidate_id)
            .order_by(Evaluation.id)
        )
        with self._read() as session:
            return [EvaluationRecord.of(row) for row in session.scalars(query)]

    def run_evaluations(self, run_name: str) -> list[EvaluationRecord]:
        """Every evaluation of a run, oldest first: for audits and exports."""
        query = select(Evaluation).where(Evaluation.run_name == run_name).order_by(Evaluation.id)
        with self._read() as session:
            return [EvaluationRecord.of(row) for row in session.scalars(query)]

    # Island migrations

    def add_migration(self, run_name: str, candidate_id: int, to_island: int) -> None:
        row = Migration(
            run_name=run_name,
            candidate_id=candidate_id,
            to_island=to_island,
            created_at=time.time(),
        )
        with self._write() as session, session.begin():
            session.add(row)

    def migrations(self, run_name: str) -> list[tuple[int, int]]:
        """(candidate id, destination island), in the order they happened."""
        query = (
            select(Migration.candidate_id, Migration.to_island)
            .where(Migration.run_name == run_name)
            .order_by(Migration.id)
        )
        with self._read() as session:
            return [(candidate_id, island) for candidate_id, island in session.execute(query)]


def _arm(session: Session, run_name: str, arm: str) -> BanditArm:
    row = session.get(BanditArm, (run_name, arm), with_for_update=True)
    if row is None:
        row = BanditArm(run_name=run_name, arm=arm, pulls=0, reward=0.0, cost_usd=0.0)
        session.add(row)
    return row


def _pull(
    session: Session, run_name: str, arm: str | None, calls: Sequence[LLMCallRecordable]
) -> None:
    if arm is not None:
        row = _arm(session, run_name, arm)
        row.pulls += 1
        row.cost_usd += sum(call.cost_usd for call in calls)


def _call_rows(
    run_name: str, candidate_id: int | None, operator: str, calls: Sequence[LLMCallRecordable]
) -> list[LLMCall]:
    now = time.time()
    return [
        LLMCall(
            run_name=run_name,
            candidate_id=candidate_id,
            provider=call.provider,
            model=call.model,
            operator=operator,
            prompt=call.prompt,
            response=call.response,
            input_tokens=call.input_tokens,
            output_tokens=call.output_tokens,
            cost_usd=call.cost_usd,
            latency_s=call.latency_s,
            status=call.status,
            error=call.error,
            created_at=now,
        )
        for call in calls
    ]
