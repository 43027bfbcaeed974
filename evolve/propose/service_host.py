"""A run's services: the ledger writer (evolve/propose/ledger_writer.py), the per-provider circuits
(evolve/llm/circuit.py) and the budgets' book of reservations (evolve/llm/reservations.py),
held by the first proposal worker (evolve/propose/workers.py).

They live in a proposal worker rather than an actor of their own: on Ray that would be a
worker process of their own (about 110 MB and a second of start-up on the way to the first
proposal) and a Ray call per model call. The proposal worker that hosts them stores its own
calls and asks its own circuits directly; on a Ray cluster, the other proposal workers
reach them through Ray (evolve/executors/ray_services.py).

Each part takes its callers behind locks of its own, so a slow write never holds up a
circuit's answer; the ledger writes from a thread of its own (evolve/propose/ledger_writer.py).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from evolve.llm import LLMCall
from evolve.llm.circuit import BASE_S, CAP_S, ProviderCircuits, SharedCircuits, State
from evolve.llm.hooks import Written
from evolve.llm.records import Status
from evolve.llm.reservations import OK, Book
from evolve.propose.ledger_writer import LedgerWriter


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
