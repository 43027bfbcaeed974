"""The run's actors that model proposals reach, wherever on the cluster they run: the
ledger writer (every model call stored as it completes) and the per-provider circuits
(one backoff shared by every worker), both on the driver's node."""

from __future__ import annotations

import logging
import time

import ray
from ray.actor import ActorHandle
from ray.exceptions import RayError

from evolve.ledger_writer import start_ledger_writer
from evolve.llm.circuit import start_circuits
from evolve.task import TaskSpec

STATUS_EVERY_S = 1.0  # how often the board asks the circuits how they stand
DRAIN_TIMEOUT_S = 10.0

log = logging.getLogger("evolve.services")


class RunServices:
    def __init__(self, ledger: ActorHandle | None, circuits: ActorHandle | None) -> None:
        self.ledger, self.circuits = ledger, circuits
        self._asking: ray.ObjectRef | None = None
        self._asked_at = 0.0
        self._line = ""

    def outage_line(self) -> str:
        """Which providers' circuits are open, for the board; never waits for the answer,
        so the loop is not held up by it."""
        if self.circuits is None:
            return ""
        if self._asking is not None:
            ready, _ = ray.wait([self._asking], timeout=0)
            if ready:
                status = ray.get(self._asking)
                self._line = "; ".join(status.values())
                self._asking = None
        if self._asking is None and time.monotonic() - self._asked_at >= STATUS_EVERY_S:
            self._asking = self.circuits.status.remote()
            self._asked_at = time.monotonic()
        return self._line

    def close(self) -> None:
        """The ledger writer first finishes the writes queued before this call: each is a
        call that was paid for."""
        if self.ledger is not None:
            try:
                ray.get(self.ledger.drained.remote(), timeout=DRAIN_TIMEOUT_S)
            except RayError:
                log.exception("the ledger writer did not confirm its last writes")
        for actor in (self.ledger, self.circuits):
            if actor is not None:
                ray.kill(actor)


def open_services(spec: TaskSpec, store_url: str) -> RunServices:
    """Only model calls travel through these; a task without models starts neither."""
    if spec.llm is None:
        return RunServices(None, None)
    return RunServices(start_ledger_writer(store_url), start_circuits())
