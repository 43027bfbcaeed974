"""A run's services: the ledger writer (evolve/ledger_writer.py), the per-provider circuits
(evolve/llm/circuit.py) and the budgets' book of reservations (evolve/llm/reservations.py),
held by the first proposal worker (evolve/proposal_workers.py).

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
from evolve.llm.reservations import OK, Book

PRUNE_AT = 256  # writes kept before the confirmed ones are looked for and forgotten


@dataclass(frozen=True)
class ServicePlan:
    """What the hosting proposal worker opens: the store its ledger writes to, how its
    circuits back off, and the run whose USD and token budgets (None: none) its book keeps."""

    store_url: str
    base_s: float = BASE_S
    cap_s: float = CAP_S
    run_name: str | None = None
    usd: float | None = None
    tokens: int | None = None

    def open(self) -> HostedServices:
        circuits = ProviderCircuits(self.base_s, self.cap_s)
        ledger = LedgerWriter(self.store_url)
        usd, tokens = (0.0, 0) if self.run_name is None else ledger.store.llm_spend(self.run_name)
        book = Book(self.usd, self.tokens, charged_usd=usd, charged_tokens=tokens)
        return HostedServices(ledger, circuits, book)


class HostedServices:
    """The services inside the process that hosts them; its threads share them."""

    def __init__(self, ledger: LedgerWriter, circuits: ProviderCircuits, book: Book) -> None:
        self.ledger, self.circuits = ledger, circuits  # the ledger takes its own turns
        self.book = book
        self._deciding = threading.Lock()

    def record(self, proposal_id: int, call: LLMCall) -> None:
        self.book.settle(call)
        self.ledger.record(proposal_id, call)

    def send(self, proposal_id: int, call: LLMCall) -> Written:
        """As a call's sink (evolve/llm/hooks.py): handed to the ledger's thread."""
        self.book.settle(call)
        return self.ledger.submit(proposal_id, call).wait

    def reserve(self, proposal_id: int, call: LLMCall) -> str:
        """As a call's sink: the reservation is held, then its "in_flight" row committed
        before the request may leave; a row that cannot be written gives the reservation
        back and raises."""
        verdict = self.book.reserve(call)
        if verdict == OK:
            try:
                self.ledger.record(proposal_id, call)
            except BaseException:
                self.book.release(call.call_id)
                raise
        return verdict

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
