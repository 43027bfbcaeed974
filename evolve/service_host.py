"""A run's services: the ledger writer (evolve/ledger_writer.py) and the per-provider circuits
(evolve/llm/circuit.py), held by the first proposal worker (evolve/proposal_workers.py).

They were an actor of their own, and so a Ray worker process of their own: about 110 MB, a
second of start-up on the way to the first proposal, and a Ray call per model call from the
proposal worker that made it, about a sixth of that worker's CPU with a fast model. Now the
proposal worker that hosts them stores its own calls and asks its own circuits directly;
the others, which a run with many proposals in flight adds, reach them through Ray.

Each part takes its callers behind locks of its own, so a slow write never holds up a
circuit's answer; the ledger writes from a thread of its own (evolve/ledger_writer.py).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import ray

from evolve.ledger_writer import LedgerWriter
from evolve.llm import LLMCall
from evolve.llm.circuit import BASE_S, CAP_S, ProviderCircuits, SharedCircuits, State
from evolve.llm.hooks import Written
from evolve.llm.records import Status

PRUNE_AT = 256  # writes kept before the confirmed ones are looked for and forgotten


@dataclass(frozen=True)
class ServicePlan:
    """What the hosting proposal worker opens: the store its ledger writes to, and how its
    circuits back off."""

    store_url: str
    base_s: float = BASE_S
    cap_s: float = CAP_S

    def open(self) -> HostedServices:
        circuits = ProviderCircuits(self.base_s, self.cap_s)
        return HostedServices(LedgerWriter(self.store_url), circuits)


class HostedServices:
    """The services inside the process that hosts them; its threads share them."""

    def __init__(self, ledger: LedgerWriter, circuits: ProviderCircuits) -> None:
        self.ledger, self.circuits = ledger, circuits  # the ledger takes its own turns
        self._deciding = threading.Lock()

    def record(self, proposal_id: int, call: LLMCall) -> None:
        self.ledger.record(proposal_id, call)

    def send(self, proposal_id: int, call: LLMCall) -> Written:
        """As a call's sink (evolve/llm/hooks.py): handed to the ledger's thread."""
        return self.ledger.submit(proposal_id, call).wait

    def drained(self) -> None:
        """Returns once every call handed to the ledger before it is written."""
        self.ledger.drained()

    def ask(self, key: str) -> tuple[float, State]:
        with self._deciding:
            return self.circuits.ask(key)

    def report(self, key: str, status: Status, retry_after: float | None = None) -> None:
        with self._deciding:
            self.circuits.report(key, status, retry_after)

    def status(self) -> dict[str, str]:
        with self._deciding:
            return self.circuits.status()

    def shared_circuits(self) -> SharedCircuits:
        return SharedCircuits(self.ask, self.report)


class RemoteLedger:
    """A call's sink in a proposal worker that does not host the services: each call goes
    to the host's `record`, which answers once the call is stored.

    The writes not yet confirmed are kept, for `flush`: when a run stops, a proposal still
    running is abandoned with its worker, and only the ledger has the calls it made. Ray
    runs a threaded actor's calls from different callers in any order, so the driver's
    `drained` could overtake a write still on its way; the driver has each such worker
    flush first."""

    def __init__(self, host: ray.actor.ActorHandle) -> None:
        self.host = host
        self._sent: list[ray.ObjectRef] = []
        self._prune_at = PRUNE_AT
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[type[RemoteLedger], tuple[ray.actor.ActorHandle]]:
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
