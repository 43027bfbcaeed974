"""Run records: creating a run, reading it back, its status, its driver's lease, its wall
time.

A run has at most one driver. The driver holds a lease: the `driver` column names it
(host, pid, start time, user) with its last heartbeat. Another driver may take the run
over only once that heartbeat is older than the lease's length, so two drivers never
spend one budget, and a driver killed on another machine frees its run by going quiet.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evolve.store.database import Database
from evolve.store.records import RunRecord, RunTotals
from evolve.store.schema import RUN_STATUSES, Candidate, LLMCall, Run


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

    def latest_run(self, *, host: str | None = None, user: str | None = None) -> RunRecord | None:
        """The newest run; with `host` and `user`, the newest started by that user on that
        host (a run from before they were recorded counts as anyone's)."""
        with self._read() as session:
            for row in session.scalars(select(Run).order_by(Run.created_at.desc())):
                settings = row.settings or {}
                if host is None or (
                    settings.get("host", host) == host and settings.get("user", user) == user
                ):
                    return RunRecord.of(row)
            return None

    def list_runs(self) -> list[RunRecord]:
        """Oldest first."""
        with self._read() as session:
            return [
                RunRecord.of(row) for row in session.scalars(select(Run).order_by(Run.created_at))
            ]

    def run_totals(self) -> dict[str, RunTotals]:
        """Each run's candidates and model spend, counted by the database in two GROUP BY
        queries, so that listing every run never loads a candidate. A run with neither
        candidates nor calls is absent: its totals are RunTotals()'s defaults."""
        candidates = select(Candidate.run_name, func.count()).group_by(Candidate.run_name)
        calls = select(
            LLMCall.run_name,
            func.count(),
            func.sum(LLMCall.cost_usd),
            func.sum(LLMCall.input_tokens + LLMCall.output_tokens),
        ).group_by(LLMCall.run_name)
        with self._read() as session:
            made = {name: n for name, n in session.execute(candidates)}
            spent = {
                name: (n, float(usd), int(tokens))
                for name, n, usd, tokens in session.execute(calls)
            }
        return {
            name: RunTotals(made.get(name, 0), *spent.get(name, (0, 0.0, 0)))
            for name in made.keys() | spent.keys()
        }

    def record_budget(self, name: str, budget: Mapping[str, Any]) -> None:
        """The budget the run has now, in its settings: `--candidates` and `--wall-time`
        replace the task's for an invocation, and a resume with them extends the run, so
        the stored task's text no longer says what the run was allowed."""
        with self._write() as session, session.begin():
            row = _locked_run(session, name)
            row.settings = {**(row.settings or {}), "budget": dict(budget)}

    def set_run_status(self, name: str, status: str) -> None:
        """Whoever drove the run, it has no driver now: a running run gets one by its lease."""
        self.end_lease(name, None, status)

    def take_lease(self, name: str, holder: Mapping[str, Any], ttl_s: float) -> dict | None:
        """Make `holder` the driver of run `name`, unless another driver's lease is live (its
        last heartbeat within `ttl_s`): then nothing changes and that driver is returned."""
        now = time.time()
        with self._write() as session, session.begin():
            row = _locked_run(session, name)
            current = row.driver if row.status == "running" else None
            heartbeat = float(current.get("heartbeat", row.updated_at)) if current else 0.0
            if current and not same_driver(current, holder) and now - heartbeat < ttl_s:
                return dict(current)
            row.status, row.updated_at = "running", now
            row.driver = {**holder, "heartbeat": now}
            return None

    def renew_lease(self, name: str, holder: Mapping[str, Any]) -> bool:
        """A heartbeat: False when `holder` no longer drives the run (another took it over)."""
        now = time.time()
        with self._write() as session, session.begin():
            row = _locked_run(session, name)
            if row.status != "running" or not row.driver or not same_driver(row.driver, holder):
                return False
            row.driver = {**row.driver, "heartbeat": now}
            row.updated_at = now
            return True

    def end_lease(self, name: str, holder: Mapping[str, Any] | None, status: str) -> bool:
        """Set the run's final `status` and free it, if `holder` still drives it (None:
        whoever does); a driver whose lease was taken over leaves the run to its new driver
        (False). One transaction, so no driver can take the run between check and write."""
        if status not in RUN_STATUSES:
            raise ValueError(f"run status must be one of {RUN_STATUSES}, not {status!r}")
        with self._write() as session, session.begin():
            row = _locked_run(session, name)
            if holder is not None and row.driver and not same_driver(row.driver, holder):
                return False
            row.status, row.updated_at, row.driver = status, time.time(), None
            return True

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


def same_driver(one: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    """One process: the same host, pid and start time (a reused pid starts later)."""
    return all(one.get(key) == other.get(key) for key in ("host", "pid", "started"))
