"""How a proposal worker on a Ray cluster that does not host the run's services reaches the
one that does (evolve/propose/workers.py): its model calls go to the host's ledger, and its
circuits are the host's, each through a Ray call to the hosting actor.
"""

from __future__ import annotations

import threading

import ray
from ray.actor import ActorHandle

from evolve.llm import LLMCall
from evolve.llm.circuit import TRUST_S, SharedCircuits, State
from evolve.llm.hooks import Written
from evolve.llm.records import Status

PRUNE_AT = 256  # writes kept before the confirmed ones are looked for and forgotten


def reaching(host: ActorHandle, trust_s: float = TRUST_S) -> SharedCircuits:
    """The circuits, through the hosting actor's `ask` and `report`."""
    view = _Reaching(host)
    return SharedCircuits(view.ask, view.tell, trust_s)


class RemoteLedger:
    """A call's sink in a proposal worker that does not host the services: each call goes
    to the host's `record`, which answers once the call is stored.

    The writes not yet confirmed are kept, for `flush`: when a run stops, a proposal still
    running is abandoned with its worker, and only the ledger has the calls it made. Ray
    runs a threaded actor's calls from different callers in any order, so the driver's
    `drained` could overtake a write still on its way; the driver has each such worker
    flush first."""

    def __init__(self, host: ActorHandle) -> None:
        self.host = host
        self._sent: list[ray.ObjectRef] = []
        self._prune_at = PRUNE_AT
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[type[RemoteLedger], tuple[ActorHandle]]:
        """A copy sent elsewhere keeps the host, and keeps track of its own writes."""
        return RemoteLedger, (self.host,)

    def send(self, proposal_id: int, call: LLMCall) -> Written:
        write = self.host.record.remote(proposal_id, call)
        with self._lock:
            self._sent.append(write)
            if len(self._sent) >= self._prune_at:  # forget the confirmed ones, now and then
                _, self._sent = ray.wait(self._sent, num_returns=len(self._sent), timeout=0)
                self._prune_at = max(PRUNE_AT, 2 * len(self._sent))
        return lambda timeout_s: ray.get(write, timeout=timeout_s)

    def reserve(self, proposal_id: int, call: LLMCall) -> str:
        """The host's `reserve`, waited for: the request must not leave before its row."""
        return ray.get(self.host.reserve.remote(proposal_id, call))

    def flush(self, timeout_s: float) -> int:
        """Waits for every write sent so far and not yet confirmed; how many still were at
        the end (kept for the next flush). A write that failed is confirmed here: the host
        logged it."""
        with self._lock:
            sent, self._sent = self._sent, []
        if not sent:
            return 0
        _, unconfirmed = ray.wait(sent, num_returns=len(sent), timeout=timeout_s)
        with self._lock:
            self._sent = unconfirmed + self._sent
        return len(unconfirmed)


class _Reaching:
    """The host's circuits over Ray. A report is not waited on when it is sent, but this
    process's next question waits for it: the host runs its circuits' calls on a thread
    of their own, and Ray keeps one caller's calls in order only for an actor with a
    single thread, so a question could overtake the report before it (a trip this
    process saw answered "closed" in one CI run)."""

    def __init__(self, host: ActorHandle) -> None:
        self.host = host
        self.lock = threading.Lock()
        self.told: list[ray.ObjectRef] = []

    def __reduce__(self) -> tuple[type[_Reaching], tuple[ActorHandle]]:
        """Another process gets a view of its own, with no reports of its own yet."""
        return _Reaching, (self.host,)

    def tell(self, key: str, status: Status, retry_after: float | None) -> None:
        with self.lock:
            self.told.append(self.host.report.remote(key, status, retry_after))

    def ask(self, key: str) -> tuple[float, State]:
        with self.lock:
            told, self.told = self.told, []
        if told:
            ray.get(told)
        return ray.get(self.host.ask.remote(key))
