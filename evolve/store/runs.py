"""Run records: creating a run, reading it back, its status and driver, its wall time."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evolve.store.database import Database
from evolve.store.records import RunRecord
from evolve.store.schema import RUN_STATUSES, Run


class Runs(Database):
    """The store's runs: one row each, named by the user and resumed by that name."""

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
            row = _locked_run(session, name)
            row.status, row.updated_at = status, time.time()
            row.driver = dict(driver) if driver is not None and status == "running" else None

    def add_wall_time(self, name: str, seconds: float) -> None:
        """Adds rather than sets, so the wall-time budget spans every resume of the run."""
        with self._write() as session, session.begin():
            row = _locked_run(session, name)
            row.wall_s_used, row.updated_at = row.wall_s_used + seconds, time.time()


def _locked_run(session: Session, name: str) -> Run:
    row = session.get(Run, name, with_for_update=True)
    if row is None:
        raise KeyError(f"no run named {name!r}")
    return row
