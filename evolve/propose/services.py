"""The driver's side of the run's services, which model proposals reach wherever on the
cluster they run: the ledger writer (every model call stored as it completes) and the
per-provider circuits (one backoff shared by every worker), both in the first proposal
worker, on the driver's node (evolve/propose/service_host.py)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as Late
from typing import Any

from evolve.executors import Actor, WorkerLost
from evolve.propose.service_host import ServicePlan
from evolve.task.schema import TaskSpec

STATUS_EVERY_S = 1.0  # how often the board asks the circuits how they stand
DRAIN_TIMEOUT_S = 10.0

log = logging.getLogger("evolve.propose.services")


class RunServices:
    """`plan`: what the hosting proposal worker opens, None for a run without models;
    `host`: that worker, once it is asked for (evolve/propose/workers.py)."""

    def __init__(self, plan: ServicePlan | None) -> None:
        self.plan = plan
        self.host: Actor | None = None
        self._asking: Future[Any] | None = None
        self._asked_at = 0.0
        self._line = ""

    def outage_line(self) -> str:
        """Which providers' circuits are open, for the board; never waits for the answer,
        so the loop is not held up by it."""
        if self.host is None:
            return ""
        if self._asking is not None and self._asking.done():
            with contextlib.suppress(WorkerLost):  # else the run is ending
                self._line = "; ".join(self._asking.result().values())
            self._asking = None
        if self._asking is None and time.monotonic() - self._asked_at >= STATUS_EVERY_S:
            self._asking = self.host.call("status")
            self._asked_at = time.monotonic()
        return self._line

    def drain(self, others: Sequence[Actor] = ()) -> None:
        """Before the host is stopped, the ledger writer finishes the writes it was sent:
        each is a call that was paid for. `others`, the proposal workers that reach it
        through Ray, first wait for the writes they sent: a threaded actor runs calls from
        different callers in any order, and `drained` could overtake one still on its way."""
        if self.host is None:
            return
        try:
            flushed = [worker.call("flushed", DRAIN_TIMEOUT_S) for worker in others]
            deadline = time.monotonic() + 2 * DRAIN_TIMEOUT_S
            unconfirmed = sum(f.result(max(0.0, deadline - time.monotonic())) for f in flushed)
            if unconfirmed:
                log.warning("%d model call(s) sent to the ledger writer unconfirmed", unconfirmed)
        except (WorkerLost, Late):
            log.exception("the proposal workers did not confirm the writes they sent")
        try:
            self.host.call("drained").result(DRAIN_TIMEOUT_S)
        except (WorkerLost, Late):
            log.exception("the ledger writer did not confirm its last writes")


def plan_services(spec: TaskSpec, store_url: str, run_name: str) -> RunServices:
    """Only model calls travel through these; a task without models hosts none."""
    if spec.llm is None:
        return RunServices(None)
    budget = spec.budget
    return RunServices(
        ServicePlan(store_url, run_name=run_name, usd=budget.usd, tokens=budget.tokens)
    )
