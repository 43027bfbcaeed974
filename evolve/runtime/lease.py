"""The driver's lease on its run: taken before the run starts or resumes, renewed by a
heartbeat thread while it runs, and ended with the run's final status.

The store keeps the lease (evolve/store/runs.py); this module is the driver's side. A
heartbeat that finds the lease gone (another driver took over a run this one had left
quiet for longer than LEASE_S, e.g. while suspended) stops this driver as Ctrl-C would,
and its run is then left to the new driver.
"""

from __future__ import annotations

import _thread
import getpass
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from evolve.runtime.processes import ProcessId
from evolve.store import Store

log = logging.getLogger(__name__)

LEASE_S = 60.0  # a driver silent this long has lost its run to whoever asks
RENEW_S = 10.0


class LeaseHeld(Exception):
    """Another live driver holds the run; the message says who and until when."""


def holder() -> dict[str, Any]:
    """This process as a run's driver."""
    return {**ProcessId.here().to_json(), "user": getpass.getuser()}


def describe(driver: dict[str, Any]) -> str:
    age = time.time() - float(driver.get("heartbeat", 0.0))
    return (
        f"pid {driver.get('pid')} of {driver.get('user', 'an unknown user')} on "
        f"{driver.get('host')}, last heard from {age:.0f} s ago"
    )


def take(store: Store, run: str, me: dict[str, Any]) -> None:
    """Make this process the run's driver, or raise LeaseHeld."""
    current = store.take_lease(run, me, LEASE_S)
    if current is not None:
        raise LeaseHeld(
            f"run {run} is being driven by {describe(current)}; stop that driver, or wait: "
            f"its lease lapses {LEASE_S:.0f} s after its last heartbeat"
        )


class RunTakenOver(RuntimeError):
    """Another driver took this driver's run over: this one must write nothing more."""


class Heartbeat:
    """Renews the lease every RENEW_S in a thread of its own; `lost` once it is gone."""

    def __init__(self, store: Store, run: str, me: dict[str, Any]) -> None:
        self.store, self.run, self.me = store, run, me
        self.lost = False
        self.renewed_at = time.monotonic()  # the lease was just taken
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="lease-heartbeat", daemon=True)

    def holds(self) -> bool:
        """Whether this driver surely still holds its run, for the loop to ask before it
        writes. Nobody can take a lease renewed less than LEASE_S ago, so this is a clock
        reading until the last renewal is older than LEASE_S - RENEW_S (a driver that was
        suspended, say, and has just woken): then it renews at once, in the caller's thread,
        rather than trust the heartbeat to have noticed."""
        if self.lost:
            return False
        if time.monotonic() - self.renewed_at < LEASE_S - RENEW_S:
            return True
        # The caller's own turns first: a commit of theirs that failed is raised to the
        # caller here, not swallowed below as a blip of the store (evolve/store/commits.py).
        self.store.wait_for_commits()
        return self._renew()

    def _renew(self) -> bool:
        """False only when the lease is gone: a store that blips is tried at the next beat."""
        asked = time.monotonic()
        try:
            held = self.store.renew_lease(self.run, self.me)
        except Exception:
            log.warning("could not renew the lease on run %s", self.run, exc_info=True)
            return True
        if held:
            self.renewed_at = max(self.renewed_at, asked)
        elif not self.lost:
            self.lost = True
            log.error("run %s was taken over by another driver: this one stops", self.run)
        return held

    def _beat(self) -> None:
        while not self._stop.wait(RENEW_S):
            if not self._renew():
                _thread.interrupt_main()
                return

    @contextmanager
    def running(self) -> Iterator[Heartbeat]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join()
